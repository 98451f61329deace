//! `libtma_itt.so`, an ITT collector: the ITT static part compiled into a program (oneDNN,
//! TBB, the LLVM OpenMP runtime, or any program built with `ittnotify`) loads the library
//! named by `INTEL_LIBITTNOTIFY64` at its first ITT call and calls its `__itt_api_init`, which
//! points the static part's function table at this collector. `tma stat --itt` sets the
//! variable and reads the regions through the `tma-marker` library:
//!
//! * `__itt_task_begin(domain, id, parent, name)` / `__itt_task_end(domain)`: a region named by
//!   the task's string handle, nested per thread;
//! * `__itt_frame_begin_v3(domain, id)` / `__itt_frame_end_v3`: a region `frame DOMAIN`;
//! * `__itt_pause()` / `__itt_resume()`: regions begun while paused are not recorded;
//! * `__itt_domain_create`, `__itt_string_handle_create`: the objects the others take.
//!
//! Every other entry of the table is left to the static part's own null function. When the
//! program also uses the marker library (`libtma_marker.so`, loaded globally), the collector
//! calls it instead of its own copy, so ITT tasks nest inside the program's marked regions.

mod abi;

/// The names the collector answers, as the static part's table lists them.
pub const IMPLEMENTED: &[&str] = &[
    "__itt_domain_create",
    "__itt_string_handle_create",
    "__itt_task_begin",
    "__itt_task_end",
    "__itt_frame_begin_v3",
    "__itt_frame_end_v3",
    "__itt_pause",
    "__itt_resume",
];

use std::cell::RefCell;

thread_local! {
    /// The names of the tasks this thread has begun and not ended (`__itt_task_end` names
    /// none), with whether each was recorded.
    static TASKS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// A task begins on this thread.
pub fn task_begin(name: &str) {
    let _ = TASKS.try_with(|t| t.borrow_mut().push(name.to_string()));
    region_begin(name);
}

/// The innermost task of this thread ends.
pub fn task_end() {
    let name = TASKS.try_with(|t| t.borrow_mut().pop()).ok().flatten();
    if let Some(n) = name {
        region_end(&n);
    }
}

/// Begin a region: in the program's own marker library when it has one loaded (so that its
/// marked regions and its ITT tasks nest in one tree), else in the collector's.
pub fn region_begin(name: &str) {
    match abi::program_marker() {
        Some(m) => m.begin(name),
        None => tma_marker::begin(name),
    }
}

/// End a region (see [`region_begin`]).
pub fn region_end(name: &str) {
    match abi::program_marker() {
        Some(m) => m.end(name),
        None => tma_marker::end(name),
    }
}

/// `__itt_pause`: in the program's marker library too.
pub fn pause() {
    tma_marker::pause();
    if let Some(m) = abi::program_marker() {
        m.pause();
    }
}

/// `__itt_resume`.
pub fn resume() {
    tma_marker::resume();
    if let Some(m) = abi::program_marker() {
        m.resume();
    }
}

/// The region name of a frame of `domain`.
pub fn frame_name(domain: &str) -> String {
    format!("frame {domain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ends_pair_with_their_begins_per_thread() {
        task_begin("a");
        task_begin("b");
        let other = std::thread::spawn(|| {
            task_begin("c");
            TASKS.with(|t| t.borrow().clone())
        })
        .join()
        .unwrap();
        assert_eq!(other, ["c"]);
        task_end();
        assert_eq!(TASKS.with(|t| t.borrow().clone()), ["a"]);
        task_end();
        task_end();
        assert!(TASKS.with(|t| t.borrow().is_empty()));
        assert_eq!(frame_name("dnnl"), "frame dnnl");
    }
}
