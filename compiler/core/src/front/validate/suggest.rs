//! "Did you mean": the closest known name by edit distance.

/// Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for (i, row) in d.chunks_mut(width).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// Longer names are not checked for typos (a candidate within `len/3` edits is at most this
/// long plus a third, so every distance computed is bounded).
const LONGEST_TYPED_NAME: usize = 128;

/// The candidate closest to `word` by edit distance, if within `max(1, len/3)` edits. Ties go
/// to the lexicographically smallest candidate, so the answer does not depend on input order.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let length = word.chars().count();
    // A name this long is pasted, not typed: no suggestion, and no quadratic distance over
    // kilobytes of hostile input.
    if length > LONGEST_TYPED_NAME {
        return None;
    }
    let threshold = (length / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != word && c.chars().count().abs_diff(length) <= threshold)
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= threshold)
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("tso", "tos"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn far_lengths_and_pasted_names_get_no_suggestion() {
        assert_eq!(did_you_mean("web", ["webserver-01"]), None);
        assert_eq!(did_you_mean("wbe", ["web"]), Some("web"));
        let long = "a".repeat(LONGEST_TYPED_NAME + 1);
        let near = format!("{long}b");
        assert_eq!(did_you_mean(&long, [near.as_str()]), None);
    }
}
