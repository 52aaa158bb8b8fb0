//! HTTP/1.1 spoken by hand over a TCP socket, for tests that send what no
//! client library would: any `Host`, a header that never ends, a body that
//! never comes, and that watch when the server closes the connection.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a test waits for a server's answer or its close before it
/// fails: generous, because the machine may be loaded; the waits end as
/// soon as the answer comes.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// An answer read off the socket.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// The head (status line and headers) as sent.
    pub head: String,
    /// The body, as far as it came (to the connection's end or its
    /// `Content-Length`).
    pub body: String,
}

impl RawResponse {
    /// The value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }
}

/// A connection to `addr` that has sent `bytes` and then holds, sending
/// nothing more.
#[derive(Debug)]
pub struct Held {
    stream: TcpStream,
}

impl Held {
    /// Connects to `addr` and sends `bytes`.
    pub fn open(addr: SocketAddr, bytes: &[u8]) -> Self {
        let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("send to {addr}: {e}"));
        Held { stream }
    }

    /// Whether the server is still waiting on this connection, without
    /// waiting here: it has sent nothing and has not closed it.
    pub fn is_waiting(&self) -> bool {
        self.stream
            .set_nonblocking(true)
            .expect("a non-blocking socket");
        let mut byte = [0u8; 1];
        let waiting = matches!(
            self.stream.peek(&mut byte),
            Err(e) if e.kind() == ErrorKind::WouldBlock
        );
        self.stream
            .set_nonblocking(false)
            .expect("a blocking socket");
        waiting
    }

    /// Sends more bytes; `false` if the server has closed the connection.
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok() && self.stream.flush().is_ok()
    }

    /// Reads until the server closes the connection: what it sent. Panics
    /// if it has not closed it within `within`.
    pub fn read_to_close(mut self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let waiting_for = format!("the server did not close the connection within {within:?}");
        let mut got = Vec::new();
        loop {
            match self.read_more(&mut got, deadline, &waiting_for) {
                Ok(true) => {}
                Ok(false) => break,
                // A reset is a close too (the server did not read all we sent).
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
                Err(e) => panic!("reading from the server: {e}"),
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    /// Reads one answer (head, and body by its `Content-Length`), waiting
    /// at most `within`.
    pub fn response(&mut self, within: Duration) -> RawResponse {
        let deadline = Instant::now() + within;
        let waiting_for = format!("no answer within {within:?}");
        let mut got = Vec::new();
        loop {
            if let Some(response) = parse(&got) {
                return response;
            }
            let ended = match self.read_more(&mut got, deadline, &waiting_for) {
                Ok(true) => continue,
                Ok(false) => "the server closed the connection without an answer".to_owned(),
                Err(e) => format!("reading from the server: {e}"),
            };
            return parse_to_end(&got)
                .unwrap_or_else(|| panic!("{ended}; got:\n{}", String::from_utf8_lossy(&got)));
        }
    }

    /// Reads what the server sends next onto `got`: `Ok(true)` if it sent
    /// bytes, `Ok(false)` if it closed the connection. Panics, saying
    /// `waiting_for` and showing `got`, if nothing came before `deadline`.
    fn read_more(
        &mut self,
        got: &mut Vec<u8>,
        deadline: Instant,
        waiting_for: &str,
    ) -> std::io::Result<bool> {
        let mut buffer = [0u8; 8192];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{waiting_for}; got:\n{}",
                String::from_utf8_lossy(got)
            );
            self.stream
                .set_read_timeout(Some(left))
                .expect("a read timeout");
            match self.stream.read(&mut buffer) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    got.extend_from_slice(&buffer[..n]);
                    return Ok(true);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sends `request` to `addr` on a connection of its own and reads the
/// answer, waiting at most [`PATIENCE`].
pub fn exchange(addr: SocketAddr, request: &str) -> RawResponse {
    Held::open(addr, request.as_bytes()).response(PATIENCE)
}

/// A complete answer at the start of `bytes`, if it is all there.
fn parse(bytes: &[u8]) -> Option<RawResponse> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut response = RawResponse {
        status: status_of(head)?,
        head: head.to_owned(),
        body: String::new(),
    };
    let length: usize = response.header("content-length")?.parse().ok()?;
    if body.len() < length {
        return None;
    }
    response.body = body[..length].to_owned();
    Some(response)
}

/// An answer whose body runs to the connection's end.
fn parse_to_end(bytes: &[u8]) -> Option<RawResponse> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some(RawResponse {
        status: status_of(head)?,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}

fn status_of(head: &str) -> Option<u16> {
    head.split_whitespace().nth(1)?.parse().ok()
}

/// `text` percent-encoded: every byte but ASCII letters and digits as
/// `%XX`, fit for a query string, a form body or a path segment.
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A form body (`application/x-www-form-urlencoded`) of `pairs`.
pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{}={}", percent_encode(name), percent_encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}
