//! The container's network: a namespace holding only `lo`, up, and a
//! forwarder for each service listening inside it.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType};
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use tokio::task::{AbortHandle, JoinSet};

use crate::{ContainerError, Service, sys};

/// A network namespace kept alive by hane's descriptor of it.
#[derive(Debug)]
pub(crate) struct NetNamespace {
    fd: OwnedFd,
}

fn net_err(step: impl Into<String>) -> impl FnOnce(io::Error) -> ContainerError {
    let step = step.into();
    move |source| ContainerError::Network { step, source }
}

impl NetNamespace {
    /// Creates a namespace on a thread of its own (hane's other threads
    /// stay where they are) and brings `lo` up in it.
    pub(crate) fn create() -> Result<NetNamespace, ContainerError> {
        on_thread(|| {
            sys::unshare_network().map_err(net_err("unshare"))?;
            let fd: OwnedFd = File::open("/proc/thread-self/ns/net")
                .map_err(net_err("open /proc/thread-self/ns/net"))?
                .into();
            loopback_up().map_err(net_err("bring lo up"))?;
            Ok(NetNamespace { fd })
        })
    }

    /// The network namespace process `pid` is in.
    pub(crate) fn of_process(pid: u32) -> Result<NetNamespace, ContainerError> {
        let path = format!("/proc/{pid}/ns/net");
        let fd: OwnedFd = File::open(&path)
            .map_err(net_err(format!("open {path}")))?
            .into();
        Ok(NetNamespace { fd })
    }

    /// Binds each service's listener inside the namespace, on a thread that
    /// enters it. A socket stays in the namespace it was created in.
    pub(crate) fn listen(
        &self,
        services: &[Service],
    ) -> Result<Vec<(Service, TcpListener)>, ContainerError> {
        if services.is_empty() {
            return Ok(Vec::new());
        }
        on_thread(|| {
            move_into_link_name_space(self.fd.as_fd(), Some(LinkNameSpaceType::Network)).map_err(
                |e| ContainerError::Network {
                    step: "enter".into(),
                    source: e.into(),
                },
            )?;
            let mut listeners = Vec::with_capacity(services.len());
            for service in services {
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, service.port));
                let listener = bind(addr).map_err(net_err(format!("listen on {addr}")))?;
                listener
                    .set_nonblocking(true)
                    .map_err(net_err(format!("listen on {addr}")))?;
                listeners.push((*service, listener));
            }
            Ok(listeners)
        })
    }

    /// A path naming the namespace for runtimes that join one by path.
    pub(crate) fn path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            self.fd.as_raw_fd()
        ))
    }
}

/// How long a listener waits for `lo` to be up: bubblewrap brings it up in
/// its child while hane prepares the start.
const LOOPBACK_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Binds `addr`, waiting while the namespace's `lo` is not up yet
/// (`127.0.0.1` is not an address there until it is).
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let deadline = std::time::Instant::now() + LOOPBACK_WITHIN;
    loop {
        match TcpListener::bind(addr) {
            Err(e)
                if e.kind() == io::ErrorKind::AddrNotAvailable
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            result => return result,
        }
    }
}

/// Runs `f` on a short-lived thread of its own, whose namespace `f` may
/// change without touching hane's other threads.
fn on_thread<T: Send>(
    f: impl FnOnce() -> Result<T, ContainerError> + Send,
) -> Result<T, ContainerError> {
    std::thread::scope(|scope| {
        scope.spawn(f).join().unwrap_or_else(|_| {
            Err(ContainerError::Network {
                step: "namespace thread".into(),
                source: io::Error::other("it panicked"),
            })
        })
    })
}

/// Brings `lo` up with one RTM_NEWLINK over netlink: in a new namespace it
/// is the only link, index 1, and down.
fn loopback_up() -> io::Result<()> {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLMSG_ERROR: u16 = 2;
    const IFF_UP: u32 = 1;
    const LOOPBACK_INDEX: i32 = 1;
    let socket = rustix::net::socket(AddressFamily::NETLINK, SocketType::RAW, None)?;
    let mut message = Vec::with_capacity(32);
    message.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    message.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes()); // nlmsg_seq
    message.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid
    message.extend_from_slice(&[0, 0]); // ifi_family AF_UNSPEC, padding
    message.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    message.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    message.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    message.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    rustix::net::sendto(
        &socket,
        &message,
        SendFlags::empty(),
        &SocketAddrNetlink::new(0, 0),
    )?;
    let mut reply = [0u8; 256];
    let (_, len) = rustix::net::recv(&socket, &mut reply[..], RecvFlags::empty())?;
    if len < 20 || u16::from_ne_bytes([reply[4], reply[5]]) != NLMSG_ERROR {
        return Err(io::Error::other("unexpected netlink reply"));
    }
    let errno = i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]);
    if errno != 0 {
        return Err(io::Error::from_raw_os_error(-errno));
    }
    Ok(())
}

/// Forwards each connection accepted inside the namespace to its service's
/// host address. The returned handles stop the listeners and every
/// connection they carry.
pub(crate) fn forward(
    listeners: Vec<(Service, TcpListener)>,
) -> Result<Vec<AbortHandle>, ContainerError> {
    let mut handles = Vec::with_capacity(listeners.len());
    for (service, listener) in listeners {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(net_err(format!(
            "register the listener of port {}",
            service.port
        )))?;
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((mut inside, _)) => {
                            connections.spawn(async move {
                                match tokio::net::TcpStream::connect(service.host).await {
                                    Ok(mut host) => {
                                        let _ = tokio::io::copy_bidirectional(&mut inside, &mut host).await;
                                    }
                                    Err(error) => tracing::warn!(port = service.port, host = %service.host, %error, "service unreachable"),
                                }
                            });
                        }
                        Err(error) => {
                            tracing::warn!(port = service.port, %error, "accept failed");
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        }
                    },
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        handles.push(task.abort_handle());
    }
    Ok(handles)
}
