fn main() {
    eprintln!("xtask: the table converter is being written; see issue 2");
    std::process::exit(2)
}
