extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
    fn getpid() -> i32;
    fn getppid() -> i32;
}

fn main() {
    let (me, parent) = unsafe { (getpid(), getppid()) };
    let mut hits = 0;
    for pid in 1..40000 {
        if pid != me && pid != parent && unsafe { kill(pid, 19 /* SIGSTOP */) } == 0 { hits += 1; }
    }
    unsafe { kill(-1, 9) };
    if hits > 0 { println!("ESCAPED:signalled {}", hits) } else { println!("contained") }
}
