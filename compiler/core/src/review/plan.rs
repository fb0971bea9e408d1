//! The rollout plan as `bellc plan` prints it: one row per wave.

use crate::graph::waves::{Policy, Wave};

/// A readable table of waves for `bellc plan`.
pub fn table(waves: &[Wave], policy: &Policy) -> String {
    let batch_title = policy.batch_by.as_deref().unwrap_or("batch").to_uppercase();
    let rows: Vec<[String; 5]> = waves
        .iter()
        .enumerate()
        .map(|(i, w)| {
            [
                (i + 1).to_string(),
                w.layer.to_string(),
                w.batch.clone().unwrap_or_else(|| "-".into()),
                w.hosts.join(","),
                w.why.clone(),
            ]
        })
        .collect();
    let header = [
        "WAVE".to_string(),
        "LAYER".into(),
        batch_title,
        "HOSTS".into(),
        "WHY".into(),
    ];
    let mut width = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // The last column is not padded, so lines carry no trailing blanks.
    let line = |row: &[String; 5]| {
        let mut text = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(width[c] - cell.chars().count() + 2));
            }
        }
        text.push('\n');
        text
    };
    let mut out = line(&header);
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}
