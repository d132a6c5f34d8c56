use std::net::{TcpStream, UdpSocket, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn main() {
    let mut escaped = false;
    for addr in ["127.0.0.1:54329", "127.0.0.1:8000", "[::1]:5432", "1.1.1.1:53"] {
        if let Ok(a) = addr.parse() {
            if TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok() { println!("ESCAPED:{}", addr); escaped = true; }
        }
    }
    if ("example.com", 80).to_socket_addrs().is_ok() { println!("ESCAPED:dns"); escaped = true; }
    if let Ok(s) = UdpSocket::bind("0.0.0.0:0") {
        if s.send_to(b"x", "8.8.8.8:53").is_ok() { println!("ESCAPED:udp"); escaped = true; }
    }
    if UnixStream::connect("/var/run/docker.sock").is_ok() { println!("ESCAPED:docker.sock"); escaped = true; }
    if !escaped { println!("contained"); }
}
