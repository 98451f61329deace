//! Values computed once per table for the life of the process (the tables are `'static`, so
//! an index of one is kept, leaked, under a key naming the table).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{OnceLock, RwLock};

/// A process-wide map from a table's key to what was built for it.
pub type Leaked<K, V> = OnceLock<RwLock<HashMap<K, &'static V>>>;

/// The value `cache` holds for `key`, built by `build` (outside the lock) the first time.
/// When two threads build at once, the first one in is kept.
pub fn get_or_build<K: Hash + Eq, V: Send + Sync + 'static>(
    cache: &'static Leaked<K, V>,
    key: K,
    build: impl FnOnce() -> V,
) -> &'static V {
    let map = cache.get_or_init(|| RwLock::new(HashMap::new()));
    if let Some(v) = map.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return v;
    }
    let built = build();
    let mut w = map.write().unwrap_or_else(|e| e.into_inner());
    w.entry(key).or_insert_with(|| Box::leak(Box::new(built)))
}
