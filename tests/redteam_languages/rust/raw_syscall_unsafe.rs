use std::arch::asm;

unsafe fn syscall3(n: usize, a: usize, b: usize, c: usize) -> isize {
    let ret: isize;
    asm!("syscall", inlateout("rax") n as isize => ret, in("rdi") a, in("rsi") b, in("rdx") c,
         lateout("rcx") _, lateout("r11") _, options(nostack));
    ret
}

fn main() {
    let mut escaped = false;
    unsafe {
        if syscall3(105 /* setuid */, 0, 0, 0) == 0 && syscall3(102 /* getuid */, 0, 0, 0) == 0 { println!("ESCAPED:root"); escaped = true; }
        if syscall3(101 /* ptrace */, 16, 1, 0) == 0 { println!("ESCAPED:ptrace"); escaped = true; }
        let path = b"/etc/shadow\0";
        if syscall3(2 /* open */, path.as_ptr() as usize, 0, 0) >= 0 { println!("ESCAPED:shadow"); escaped = true; }
        let s = syscall3(41 /* socket */, 2, 1, 0);
        let addr: [u8; 16] = [2, 0, 0xd4, 0x39, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        if s >= 0 && syscall3(42 /* connect */, s as usize, addr.as_ptr() as usize, 16) == 0 { println!("ESCAPED:connect"); escaped = true; }
        // Scribble over memory we do not own: a segfault is the expected end.
        let p = 0x1000 as *mut u64;
        std::ptr::write_volatile(p, 0xdead);
    }
    if !escaped { println!("contained"); }
}
