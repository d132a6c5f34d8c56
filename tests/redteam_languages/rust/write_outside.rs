use std::fs::OpenOptions;
use std::io::Write;

fn main() {
    let mut escaped = false;
    for p in ["/opt/assay/pwned", "/etc/pwned", "/usr/local/lib/pwned", "/var/pwned", "/pwned", "/dev/shm/../../pwned"] {
        if let Ok(mut f) = OpenOptions::new().create(true).write(true).open(p) {
            if f.write_all(b"pwned").is_ok() {
                println!("ESCAPED:{}", p);
                escaped = true;
            }
        }
    }
    if !escaped { println!("contained"); }
}
