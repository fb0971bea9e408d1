//! Who acts, and when: what the commands that record an act (an enrollment accepted or
//! rejected, a rollout started, a hold) write beside it, and how long ago, as people read it.

/// Who acts, when `--by` does not say: `$USER@HOSTNAME`.
pub fn name() -> String {
    format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "someone".into()),
        std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into())
    )
}

/// Seconds since the epoch (0 on a clock before it: such a record reads as very old).
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `3h 12m`, `4m 5s`, `12s`.
pub fn duration(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m {}s", secs / 60, secs % 60),
        3600..=86_399 => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {}h", secs / 86_400, secs % 86_400 / 3600),
    }
}
