//! `UdpSocket` with std's API, parking user threads (see `net`).

use super::Io;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// A UDP socket (`std::net::UdpSocket`'s API).
#[derive(Debug)]
pub struct UdpSocket {
    io: Io<std::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds a socket to `addr`.
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        Ok(UdpSocket { io: Io::new(std::net::UdpSocket::bind(addr)?)? })
    }

    /// Receives a datagram and its sender's address.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.read_op(|s| s.recv_from(buf))
    }

    /// Receives a datagram without removing it from the queue.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.read_op(|s| s.peek_from(buf))
    }

    /// Sends a datagram to `addr` (its first address).
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let a = addr.to_socket_addrs()?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
        })?;
        self.io.write_op(|s| s.send_to(buf, a))
    }

    /// Connects the socket to `addr`: `send` and `recv` then use it.
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        self.io.get()?.connect(addr)
    }

    /// Sends a datagram to the connected address.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.write_op(|s| s.send(buf))
    }

    /// Receives a datagram from the connected address.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.read_op(|s| s.recv(buf))
    }

    /// Receives a datagram from the connected address without removing it.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.read_op(|s| s.peek(buf))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.local_addr()
    }

    /// The connected address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.peer_addr()
    }

    /// Another handle to the same socket (`dup`), with no timeouts.
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        Ok(UdpSocket { io: Io::new(self.io.get()?.try_clone()?)? })
    }

    /// Bounds each receive: after `d` it fails with `WouldBlock`.
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.io.set_read_timeout(d)
    }

    /// Bounds each send.
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.io.set_write_timeout(d)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.read_timeout())
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.write_timeout())
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get()?.set_broadcast(on)
    }

    /// `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.get()?.broadcast()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get()?.set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get()?.ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get()?.take_error()
    }

    /// The std socket, in blocking mode, with this socket's timeouts.
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        let (s, r, w) = self.io.into_inner()?;
        s.set_read_timeout(r)?;
        s.set_write_timeout(w)?;
        Ok(s)
    }
}

impl From<std::net::UdpSocket> for UdpSocket {
    /// Takes over a std socket; its timeouts are read over.
    fn from(s: std::net::UdpSocket) -> UdpSocket {
        let r = s.read_timeout().ok().flatten();
        let w = s.write_timeout().ok().flatten();
        let io = Io::wrap(s);
        let _ = io.set_read_timeout(r);
        let _ = io.set_write_timeout(w);
        UdpSocket { io }
    }
}

impl std::os::fd::AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.io.as_raw_fd()
    }
}
