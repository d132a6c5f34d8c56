// Compile-time reads of files on the build machine.
const SHADOW: &str = include_str!("/etc/shadow");
const RANDOM: &[u8] = include_bytes!("/dev/urandom");

fn main() {
    println!("{} {}", SHADOW.len(), RANDOM.len());
}
