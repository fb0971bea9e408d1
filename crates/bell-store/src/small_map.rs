//! A map of a few entries by name, for what a host view keeps per command (`apply`, `check`)
//! or per category (`apply`, `health`).
//!
//! A `BTreeMap` allocates room for eleven entries with its first one; a fleet's reader holds
//! four such maps for each of 100,000 hosts, and on a first reading most of its time went to
//! the kernel clearing the fresh pages they took. Two entries in a vector take a tenth of that.

use std::borrow::Borrow;

/// Entries kept in order of their names, as a `BTreeMap` keeps them, each name once.
#[derive(Clone, PartialEq, Eq)]
pub struct SmallMap<V>(Vec<(String, V)>);

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        SmallMap(Vec::new())
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for SmallMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> SmallMap<V> {
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    pub fn get(&self, name: &str) -> Option<&V> {
        self.find(name).ok().map(|at| &self.0[at].1)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.find(name).ok().map(|at| &mut self.0[at].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Puts `value` under `name`; what was there before, if anything.
    pub fn insert(&mut self, name: String, value: V) -> Option<V> {
        match self.find(&name) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, value)),
            Err(at) => {
                // Two is what a host files (an apply's report and a check's).
                if self.0.capacity() == 0 {
                    self.0.reserve_exact(2);
                }
                self.0.insert(at, (name, value));
                None
            }
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<V> {
        self.find(name).ok().map(|at| self.0.remove(at).1)
    }

    /// Each name and its value, in the order of the names.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &V)> + ExactSizeIterator {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V, Q: Borrow<str> + ?Sized> std::ops::Index<&Q> for SmallMap<V> {
    type Output = V;

    /// The value under `name`; panics when there is none, as a `BTreeMap` does.
    fn index(&self, name: &Q) -> &V {
        match self.get(name.borrow()) {
            Some(value) => value,
            None => panic!("no entry named {:?}", name.borrow()),
        }
    }
}

impl<V> FromIterator<(String, V)> for SmallMap<V> {
    /// The last value of a name given twice stands, as in a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (String, V)>>(entries: I) -> Self {
        let entries = entries.into_iter();
        let mut map = SmallMap(Vec::with_capacity(entries.size_hint().0));
        for (name, value) in entries {
            map.insert(name, value);
        }
        map
    }
}

impl<V, const N: usize> From<[(String, V); N]> for SmallMap<V> {
    fn from(entries: [(String, V); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl<V> IntoIterator for SmallMap<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, V> IntoIterator for &'a SmallMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, V)>,
        fn(&'a (String, V)) -> (&'a String, &'a V),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<V: serde::Serialize> serde::Serialize for SmallMap<V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::SmallMap;
    use std::collections::BTreeMap;

    #[test]
    fn it_keeps_what_a_btree_map_keeps_in_the_same_order() {
        let steps: [(&str, Option<u32>); 9] = [
            ("check", Some(1)),
            ("apply", Some(2)),
            ("health", Some(3)),
            ("apply", Some(4)),
            ("check", None),
            ("zz", Some(5)),
            ("", Some(6)),
            ("check", Some(7)),
            ("health", None),
        ];
        let (mut small, mut btree) = (SmallMap::default(), BTreeMap::new());
        for (name, value) in steps {
            let (a, b) = match value {
                Some(v) => (
                    small.insert(name.to_string(), v),
                    btree.insert(name.to_string(), v),
                ),
                None => (small.remove(name), btree.remove(name)),
            };
            assert_eq!(a, b, "{name}");
            assert_eq!(
                small.iter().collect::<Vec<_>>(),
                btree.iter().collect::<Vec<_>>()
            );
            assert_eq!(small.len(), btree.len());
            assert_eq!(small.contains_key(name), btree.contains_key(name));
        }
        assert_eq!(small["apply"], 4);
        assert_eq!(
            serde_json::to_string(&small).unwrap(),
            serde_json::to_string(&btree).unwrap()
        );
        let collected: SmallMap<u32> = [
            ("b".to_string(), 1),
            ("a".to_string(), 2),
            ("b".to_string(), 3),
        ]
        .into_iter()
        .collect();
        assert_eq!(format!("{collected:?}"), r#"{"a": 2, "b": 3}"#);
    }
}
