use std::io::Write;

fn main() {
    let out = std::io::stdout();
    let mut lock = out.lock();
    let block = [b'r'; 1 << 16];
    loop {
        if lock.write_all(&block).is_err() { std::process::abort(); }
    }
}
