//! How a host reboots when a change needs it: the `reboot` settings of its spec, carried in the
//! manifest so that bell-run (which knows nothing of the language) can decide on the host, and
//! the grammar of a maintenance window, parsed here so that `bellc` refuses at build time exactly
//! what bell-run could not read.
//!
//! A window is `DAYS START-END [ZONE]`: `Sat,Sun 02:00-05:00`, `Mon-Fri 22:30-01:00 +01:00`,
//! `02:00-04:00 UTC` (every day). The days are those the window *starts* on, so a window that
//! crosses midnight ends the next morning. The zone is `UTC` (the default) or a fixed offset;
//! a fixed offset and not a zone name, because a window must mean the same on every host
//! whatever its tz database holds, and a build machine cannot check a name against it.

use crate::Probe;
use serde::{Deserialize, Serialize};

/// `reboot` of the spec, as bell-run needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reboot {
    /// `when-required`: reboot inside a window when a reason says so; `never`: report only.
    pub policy: RebootPolicy,
    pub method: RebootMethod,
    /// When the host may reboot, as written (each parses with [`Window::parse`]); none: any
    /// time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<String>,
    /// Runs before the reboot (a drain); when it fails, the host does not reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_reboot: Option<Probe>,
    /// Runs on the first apply after the boot, before the health probes; it counts as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_boot: Option<Probe>,
    /// The arguments `kernel-args` resources add to the kernel command line, and those they
    /// take out: what a kexec boots with, on top of the running command line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_args_removed: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RebootPolicy {
    WhenRequired,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RebootMethod {
    /// `systemctl reboot`: firmware, bootloader, the kernel it picks.
    Reboot,
    /// `kexec` into the installed kernel with the new command line, skipping the firmware.
    Kexec,
}

impl Reboot {
    /// `before-reboot` and `after-boot`, those there are.
    pub fn hooks(&self) -> impl Iterator<Item = &Probe> {
        self.before_reboot.iter().chain(&self.after_boot)
    }

    pub fn hooks_mut(&mut self) -> impl Iterator<Item = &mut Probe> {
        self.before_reboot.iter_mut().chain(&mut self.after_boot)
    }

    /// Whether `now` (Unix seconds) is inside one of the windows (always, when there is none).
    /// A window that does not parse (a manifest bellc did not write) is never open.
    pub fn window_open(&self, now: u64) -> bool {
        self.windows.is_empty()
            || self
                .windows
                .iter()
                .any(|w| Window::parse(w).is_ok_and(|w| w.contains(now)))
    }
}

/// One maintenance window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Bit `d` set: the window starts on day `d` (0 = Monday).
    days: u8,
    /// Minutes after local midnight.
    start: u16,
    end: u16,
    /// Local time minus UTC, in minutes.
    offset: i16,
}

const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const MINUTES_PER_DAY: i64 = 24 * 60;

impl Window {
    /// Reads `DAYS START-END [ZONE]`; the error says what is wrong in words a spec author
    /// can act on.
    pub fn parse(text: &str) -> Result<Window, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (days, times, zone) = match words.as_slice() {
            [times] => (None, *times, None),
            [first, second] if second.contains(':') && !first.contains(':') => {
                (Some(*first), *second, None)
            }
            [times, zone] => (None, *times, Some(*zone)),
            [days, times, zone] => (Some(*days), *times, Some(*zone)),
            _ => {
                return Err(format!(
                    "`{text}` is not a window: write DAYS START-END [ZONE], such as \
                     `Sat,Sun 02:00-05:00 UTC`"
                ))
            }
        };
        let days = match days {
            None | Some("*") => 0x7f,
            Some(days) => parse_days(days)?,
        };
        let (start, end) = times
            .split_once('-')
            .ok_or_else(|| format!("`{times}` is not START-END, such as `02:00-05:00`"))?;
        let (start, end) = (parse_time(start)?, parse_time(end)?);
        if start == end {
            return Err(format!(
                "`{times}` is empty: it starts when it ends (a window that is always open needs \
                 no `window`)"
            ));
        }
        let offset = match zone {
            None | Some("UTC") => 0,
            Some(zone) => parse_offset(zone)?,
        };
        Ok(Window {
            days,
            start,
            end,
            offset,
        })
    }

    /// Whether the instant `unix` seconds falls inside the window.
    pub fn contains(&self, unix: u64) -> bool {
        let local = i64::try_from(unix / 60).unwrap_or(i64::MAX / 2) + i64::from(self.offset);
        let minute = local.rem_euclid(MINUTES_PER_DAY);
        // 1970-01-01 was a Thursday (day 3 counted from Monday).
        let day = (local.div_euclid(MINUTES_PER_DAY) + 3).rem_euclid(7);
        let starts_on = |d: i64| self.days & (1 << d) != 0;
        let (start, end) = (i64::from(self.start), i64::from(self.end));
        if start < end {
            starts_on(day) && (start..end).contains(&minute)
        } else {
            // Across midnight: tonight's window, or the rest of yesterday's.
            (starts_on(day) && minute >= start) || (starts_on((day + 6) % 7) && minute < end)
        }
    }
}

/// `Mon-Fri`, `Sat,Sun`, `Mon,Wed-Fri`.
fn parse_days(text: &str) -> Result<u8, String> {
    let day = |name: &str| {
        DAY_NAMES
            .iter()
            .position(|d| d.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                format!(
                    "`{name}` is not a day: days are {}, `-` for a range and `,` between",
                    DAY_NAMES.join(", ")
                )
            })
    };
    let mut days = 0u8;
    for part in text.split(',') {
        let (from, to) = match part.split_once('-') {
            Some((from, to)) => (day(from)?, day(to)?),
            None => (day(part)?, day(part)?),
        };
        if to < from {
            return Err(format!(
                "`{part}` runs backwards: write the days from Monday on, such as `Mon-Fri`"
            ));
        }
        for d in from..=to {
            days |= 1 << d;
        }
    }
    Ok(days)
}

/// `HH:MM` on a 24-hour clock; `24:00` is the end of the day.
fn parse_time(text: &str) -> Result<u16, String> {
    let bad = || format!("`{text}` is not a time: write HH:MM on a 24-hour clock, such as `02:30`");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 || !(h.chars().chain(m.chars())).all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m): (u16, u16) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    match (h, m) {
        (24, 0) => Ok(24 * 60),
        (0..=23, 0..=59) => Ok(h * 60 + m),
        _ => Err(bad()),
    }
}

/// `+01:00`, `-05:30`.
fn parse_offset(text: &str) -> Result<i16, String> {
    let bad = || {
        format!(
            "`{text}` is not a time zone: write `UTC` or an offset from it such as `+01:00` \
             (a fixed offset: a zone name would depend on each host's tz database)"
        )
    };
    let (sign, rest) = if let Some(rest) = text.strip_prefix('+') {
        (1, rest)
    } else if let Some(rest) = text.strip_prefix('-') {
        (-1, rest)
    } else {
        return Err(bad());
    };
    let minutes = parse_time(rest).map_err(|_| bad())?;
    if minutes > 14 * 60 {
        return Err(bad());
    }
    i16::try_from(minutes).map(|m| sign * m).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::Window;

    /// 2026-11-28 was a Saturday; this is its midnight UTC.
    const SATURDAY: u64 = 1_795_824_000;
    const HOUR: u64 = 3600;

    #[test]
    fn weekend_nights() {
        let w = Window::parse("Sat,Sun 02:00-05:00").unwrap();
        assert!(!w.contains(SATURDAY + HOUR));
        assert!(w.contains(SATURDAY + 2 * HOUR));
        assert!(w.contains(SATURDAY + 5 * HOUR - 1));
        assert!(!w.contains(SATURDAY + 5 * HOUR));
        assert!(w.contains(SATURDAY + 24 * HOUR + 3 * HOUR), "Sunday");
        assert!(!w.contains(SATURDAY + 48 * HOUR + 3 * HOUR), "Monday");
        assert!(!w.contains(SATURDAY - 24 * HOUR + 3 * HOUR), "Friday");
    }

    #[test]
    fn across_midnight_and_offsets() {
        // Friday 23:00 to Saturday 01:00, local time one hour ahead of UTC.
        let w = Window::parse("Fri 23:00-01:00 +01:00").unwrap();
        assert!(w.contains(SATURDAY - 30 * 60), "Sat 00:30 local");
        assert!(w.contains(SATURDAY - HOUR - 1), "Fri 23:59 local");
        assert!(!w.contains(SATURDAY), "Sat 01:00 local");
        assert!(
            !w.contains(SATURDAY + 24 * HOUR - 30 * 60),
            "Sun 00:30 local"
        );
        let daily = Window::parse("22:00-24:00 -05:30").unwrap();
        assert!(daily.contains(SATURDAY + 4 * HOUR), "22:30 local");
        assert!(!daily.contains(SATURDAY + 6 * HOUR), "00:30 local");
        assert!(Window::parse("Mon-Fri 02:00-04:00 UTC")
            .unwrap()
            .contains(SATURDAY + 2 * 24 * HOUR + 3 * HOUR));
    }

    #[test]
    fn mistakes_are_named() {
        for (text, says) in [
            ("Sat,Sun", "is not START-END"),
            ("Sat 2:00-05:00", "is not a time"),
            ("Sat 02:00-25:00", "is not a time"),
            ("Sat 02:00-02:00", "is empty"),
            ("Saturday 02:00-05:00", "is not a day"),
            ("Fri-Mon 02:00-05:00", "runs backwards"),
            ("Sat 02:00-05:00 Europe/Berlin", "is not a time zone"),
            ("Sat 02:00-05:00 +15:00", "is not a time zone"),
            ("a b c d", "is not a window"),
            ("", "is not a window"),
        ] {
            let err = Window::parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
