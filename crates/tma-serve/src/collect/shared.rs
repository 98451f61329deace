//! What scrapes read, shared between the collector and the HTTP workers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::expo::{self, Family, Format, Kind};
use crate::http::Stats;

/// What scrapes read: the families of the last interval, and the server's own counts.
#[derive(Debug)]
pub struct Shared {
    families: Mutex<Arc<Vec<Family>>>,
    ready: AtomicBool,
    pub stats: Arc<Stats>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            families: Mutex::new(Arc::new(Vec::new())),
            ready: AtomicBool::new(false),
            stats: Arc::new(Stats::default()),
        }
    }
}

impl Shared {
    /// Replace the published families (after an interval).
    pub fn publish(&self, families: Vec<Family>, ready: bool) {
        *self.families.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(families);
        if ready {
            self.ready.store(true, Ordering::SeqCst);
        }
    }

    /// An interval has been published.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The exposition in `format`, with the scrape's own figures at the end.
    pub fn render(&self, format: Format) -> String {
        let t0 = Instant::now();
        let families = Arc::clone(&self.families.lock().unwrap_or_else(|p| p.into_inner()));
        let mut out = String::with_capacity(16 * 1024);
        expo::write(&families, format, &mut out);
        let mut http = Family::new(
            "tma_http_responses",
            Kind::Counter,
            "HTTP responses of this exporter by status code (before this one).",
        );
        for (code, n) in self.stats.snapshot() {
            http.push(vec![("code", code.to_string())], n as f64);
        }
        let mut dur = Family::new(
            "tma_scrape_duration_seconds",
            Kind::Gauge,
            "Time this scrape took to render, seconds.",
        );
        dur.push(Vec::new(), t0.elapsed().as_secs_f64());
        expo::write(&[http, dur], format, &mut out);
        expo::finish(format, &mut out);
        out
    }
}
