//! `mkseeds DIR TARGET...`: writes each target's seeds ([`tma_fuzz::seeds::gather`]) to
//! DIR/<target>, replacing what was there (not a fuzz target; scripts/fuzz.sh runs it before
//! fuzzing).
fn main() {
    let mut args = std::env::args().skip(1);
    let out = args.next().expect("usage: mkseeds DIR TARGET...");
    for t in args {
        assert!(
            tma_fuzz::targets::by_name(&t).is_some(),
            "mkseeds: no target {t}"
        );
        let n = tma_fuzz::seeds::write(&std::path::Path::new(&out).join(&t), &t)
            .unwrap_or_else(|e| panic!("mkseeds: writing the seeds of {t}: {e}"));
        println!("mkseeds: {t}: {n} seeds");
    }
}
