use std::thread;
use std::time::Duration;

fn main() {
    let mut made = 0usize;
    for _ in 0..4000 {
        match thread::Builder::new().stack_size(64 * 1024).spawn(|| loop { thread::sleep(Duration::from_secs(60)) }) {
            Ok(_) => made += 1,
            Err(_) => break,
        }
    }
    if made >= 512 { println!("ESCAPED:threads={}", made) } else { println!("contained threads={}", made) }
    std::process::exit(0);
}
