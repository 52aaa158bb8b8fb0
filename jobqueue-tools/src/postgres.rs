//! Finding a PostgreSQL server: `DATABASE_URL`, else the local server if one
//! answers, else a private cluster started from the PostgreSQL binaries on
//! this machine.
//!
//! A private cluster keeps PostgreSQL's durable defaults (fsync and
//! synchronous_commit on), listens on 127.0.0.1 only and trusts local
//! connections. `initdb` and `postgres` refuse to run as root, so when this
//! process is root the cluster is owned by, and run as, the `nobody` user.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};

/// The server tried when `DATABASE_URL` is not set.
pub const LOCAL_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Port of the shared private cluster (override with `JOBQUEUE_PG_PORT`).
pub const PRIVATE_PORT: u16 = 54329;

/// Why no server could be found or started.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// No server to use was given or answers, and none can be started: no
    /// directory with `initdb`, `pg_ctl` and `postgres` was found.
    #[error(
        "no PostgreSQL server answers at {LOCAL_URL} and no PostgreSQL binaries were found \
         (looked in $PG_BIN_DIR, /usr/lib/postgresql/*/bin, /usr/local/pgsql/bin and $PATH); \
         install PostgreSQL (e.g. `apt-get install postgresql`) or set DATABASE_URL"
    )]
    NoServer,
    /// A cluster of this project's own was asked for (`--own-cluster`, the
    /// failover bench, the fault tests), and no directory with `initdb`,
    /// `pg_ctl` and `postgres` was found.
    #[error(
        "a PostgreSQL cluster of this project's own needs the PostgreSQL server binaries \
         (initdb, pg_ctl, postgres, pg_basebackup), and none were found in $PG_BIN_DIR, \
         /usr/lib/postgresql/*/bin, /usr/local/pgsql/bin or $PATH: install PostgreSQL's \
         server package (e.g. `apt-get install postgresql`), or set PG_BIN_DIR to the \
         directory that holds them"
    )]
    NoBinaries,
    /// A standby did not reach a replication state in time.
    #[error(
        "the primary at {url} did not report standby `{standby}` with {condition} within \
         {secs} s (each cluster's log is server.log beside its data directory)"
    )]
    Replication {
        /// The primary's URL.
        url: String,
        /// The standby's `application_name`.
        standby: String,
        /// The `pg_stat_replication` condition waited for.
        condition: String,
        /// How long it was waited for.
        secs: u64,
    },
    /// A PostgreSQL program failed.
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed.
        output: String,
    },
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The cluster started but does not accept connections.
    #[error("the private cluster at {url} does not accept connections: {reason}")]
    Unreachable {
        /// Its URL.
        url: String,
        /// The last connection error.
        reason: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |source| ServerError::Io { what, source }
}

/// The URL of a server to use: `DATABASE_URL` if set; else the local server
/// at [`LOCAL_URL`] if it answers; else the shared private cluster on port
/// [`PRIVATE_PORT`], started (and initialized) if needed and left running
/// for later runs.
pub fn database_url() -> Result<String, ServerError> {
    if let Ok(url) = std::env::var("DATABASE_URL")
        && !url.trim().is_empty()
    {
        return Ok(url);
    }
    if answers(LOCAL_URL) {
        return Ok(LOCAL_URL.to_owned());
    }
    let port = std::env::var("JOBQUEUE_PG_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(PRIVATE_PORT);
    let base = std::env::temp_dir().join(format!("jobqueue-pg-{port}"));
    let cluster = match PrivateCluster::new(base, port) {
        Err(ServerError::NoBinaries) => return Err(ServerError::NoServer),
        cluster => cluster?,
    };
    cluster.ensure_running()?;
    Ok(cluster.url("postgres"))
}

/// Whether a server accepts a connection at `url`.
pub fn answers(url: &str) -> bool {
    PgConnection::establish(&with_connect_timeout(url)).is_ok()
}

/// `url` with a three-second connect timeout unless it sets one (an empty
/// URL is left as it is: it fails to connect).
fn with_connect_timeout(url: &str) -> String {
    jobqueue_core::engine::connectable_url(url, Duration::from_secs(3))
        .unwrap_or_else(|_| url.to_owned())
}

/// A PostgreSQL cluster of this project's own: a data directory, a port on
/// 127.0.0.1, and the machine's PostgreSQL binaries to run it.
#[derive(Debug, Clone)]
pub struct PrivateCluster {
    base: PathBuf,
    port: u16,
    bin_dir: PathBuf,
    /// `Some(user)` when running as root: the cluster is run as this user.
    run_as: Option<String>,
    /// `-c name=value` settings added at every start (see [`Self::with_setting`]).
    settings: Vec<(String, String)>,
}

/// How to stop a cluster (`pg_ctl stop -m MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Disconnect clients, shut down cleanly.
    Fast,
    /// Abort at once, as a crash would; recovery runs at the next start.
    Immediate,
}

impl PrivateCluster {
    /// A cluster kept under `base` (data in `base/data`, log in
    /// `base/server.log`) serving port `port`. Nothing is started yet.
    pub fn new(base: impl Into<PathBuf>, port: u16) -> Result<Self, ServerError> {
        let run_as = unprivileged_user()?.map(str::to_owned);
        Ok(PrivateCluster {
            base: base.into(),
            port,
            bin_dir: find_bin_dir().ok_or(ServerError::NoBinaries)?,
            run_as,
            settings: Vec::new(),
        })
    }

    /// Starts the server with `name = value` (a word, no spaces or quotes)
    /// on its command line, after the defaults, so it overrides them
    /// (`max_connections` too) and whatever `postgresql.conf` says: for a
    /// test cluster that needs settings of its own (`wal_level`,
    /// `max_prepared_transactions`, a small `max_connections`).
    pub fn with_setting(mut self, name: &str, value: &str) -> Self {
        self.settings.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The port it serves.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// URL of database `database` on this cluster, as user `postgres`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn data_dir(&self) -> PathBuf {
        self.base.join("data")
    }

    /// Initializes the data directory if needed and starts the server if it
    /// is not running; waits until it accepts connections. Concurrent callers
    /// (other processes too) take turns under a lock file.
    pub fn ensure_running(&self) -> Result<(), ServerError> {
        fs::create_dir_all(&self.base).map_err(io(format!("creating {}", self.base.display())))?;
        let lock_path = self.base.with_extension("lock");
        let lock =
            File::create(&lock_path).map_err(io(format!("creating {}", lock_path.display())))?;
        lock.lock()
            .map_err(io(format!("locking {}", lock_path.display())))?;
        // A running cluster's files are left alone: its server creates and
        // removes them meanwhile (a `chown -R` would race with a database
        // being dropped), and processes sharing the cluster each call this.
        if !self.is_running() {
            self.give_to_owner(&self.base)?;
            if !self.data_dir().join("PG_VERSION").exists() {
                self.initdb()?;
            }
            self.start()?;
        }
        self.wait_ready(Duration::from_secs(30))
    }

    fn initdb(&self) -> Result<(), ServerError> {
        let data = self.data_dir();
        if data.exists() {
            fs::remove_dir_all(&data).map_err(io(format!("clearing {}", data.display())))?;
        }
        fs::create_dir_all(&data).map_err(io(format!("creating {}", data.display())))?;
        self.give_to_owner(&data)?;
        self.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--encoding=UTF8".as_ref(),
                "--no-instructions".as_ref(),
            ],
        )?;
        Ok(())
    }

    /// Makes the (initialized, stopped) cluster accept TLS connections only:
    /// the PEM certificate `cert` and key `key` are copied into its data
    /// directory, `ssl` is turned on, and TCP connections must be `hostssl`.
    /// For testing clients against a server that refuses plain text.
    pub fn require_tls(&self, cert: &Path, key: &Path) -> Result<(), ServerError> {
        use std::io::Write as _;
        use std::os::unix::fs::PermissionsExt;
        let data = self.data_dir();
        for (from, name) in [(cert, "server.crt"), (key, "server.key")] {
            let to = data.join(name);
            fs::copy(from, &to).map_err(io(format!(
                "copying {} to {}",
                from.display(),
                to.display()
            )))?;
            fs::set_permissions(&to, fs::Permissions::from_mode(0o600))
                .map_err(io(format!("restricting {}", to.display())))?;
        }
        let conf = data.join("postgresql.conf");
        fs::OpenOptions::new()
            .append(true)
            .open(&conf)
            .and_then(|mut file| {
                file.write_all(
                    b"\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n",
                )
            })
            .map_err(io(format!("writing {}", conf.display())))?;
        let hba = data.join("pg_hba.conf");
        fs::write(
            &hba,
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n",
        )
        .map_err(io(format!("writing {}", hba.display())))?;
        self.give_to_owner(&data)
    }

    /// Starts the server (it must be initialized and stopped).
    pub fn start(&self) -> Result<(), ServerError> {
        let mut options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories='{}' -c max_connections=300",
            self.port,
            self.base.display()
        );
        for (name, value) in &self.settings {
            options.push_str(&format!(" -c {name}={value}"));
        }
        let log = self.base.join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data_dir().as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "-o".as_ref(),
                options.as_ref(),
                "start".as_ref(),
            ],
        )?;
        Ok(())
    }

    /// Stops the server.
    pub fn stop(&self, mode: StopMode) -> Result<(), ServerError> {
        let mode = match mode {
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        };
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data_dir().as_os_str(),
                "-m".as_ref(),
                mode.as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        )?;
        Ok(())
    }

    /// Makes this cluster (not initialized yet) a streaming standby of
    /// `primary` (running): copies it with `pg_basebackup -R`, which also
    /// writes the standby's connection to it, naming itself
    /// `application_name` (what `synchronous_standby_names` lists). Start
    /// it with [`Self::start`].
    pub fn clone_as_standby(
        &self,
        primary: &PrivateCluster,
        application_name: &str,
    ) -> Result<(), ServerError> {
        fs::create_dir_all(&self.base).map_err(io(format!("creating {}", self.base.display())))?;
        self.give_to_owner(&self.base)?;
        let conninfo = format!(
            "host=127.0.0.1 port={} user=postgres application_name={application_name}",
            primary.port
        );
        self.run(
            "pg_basebackup",
            &[
                "-D".as_ref(),
                self.data_dir().as_os_str(),
                "-d".as_ref(),
                conninfo.as_ref(),
                "-R".as_ref(),
                "-X".as_ref(),
                "stream".as_ref(),
                "-c".as_ref(),
                "fast".as_ref(),
            ],
        )?;
        Ok(())
    }

    /// Promotes this standby to a primary (`pg_ctl promote`, waiting until
    /// it takes writes).
    pub fn promote(&self) -> Result<(), ServerError> {
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data_dir().as_os_str(),
                "-w".as_ref(),
                "promote".as_ref(),
            ],
        )?;
        Ok(())
    }

    /// Makes every commit wait until standby `application_name` has
    /// flushed it (`synchronous_standby_names`), and waits until this
    /// primary reports it synchronous.
    pub fn require_sync(&self, application_name: &str) -> Result<(), ServerError> {
        let mut conn = self.admin()?;
        let set = format!("ALTER SYSTEM SET synchronous_standby_names = '{application_name}'");
        for sql in [set.as_str(), "SELECT pg_reload_conf()"] {
            diesel::sql_query(sql)
                .execute(&mut conn)
                .map_err(|e| self.unreachable(e))?;
        }
        self.wait_replication(application_name, "sync_state = 'sync'")
    }

    /// Waits until this primary reports standby `application_name` in
    /// `pg_stat_replication` with `condition` true, up to 30 s.
    fn wait_replication(&self, application_name: &str, condition: &str) -> Result<(), ServerError> {
        const WITHIN: Duration = Duration::from_secs(30);
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let mut conn = self.admin()?;
        let query = format!(
            "SELECT count(*) AS n FROM pg_stat_replication \
             WHERE application_name = '{application_name}' AND {condition}"
        );
        let deadline = Instant::now() + WITHIN;
        loop {
            let found = diesel::sql_query(&query)
                .get_result::<Count>(&mut conn)
                .map_err(|e| self.unreachable(e))?;
            if found.n == 1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ServerError::Replication {
                    url: self.url("postgres"),
                    standby: application_name.to_owned(),
                    condition: condition.to_owned(),
                    secs: WITHIN.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A connection to its `postgres` database.
    fn admin(&self) -> Result<PgConnection, ServerError> {
        PgConnection::establish(&with_connect_timeout(&self.url("postgres")))
            .map_err(|e| self.unreachable(e))
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> ServerError {
        ServerError::Unreachable {
            url: self.url("postgres"),
            reason: e.to_string(),
        }
    }

    /// The server's processes: the postmaster (from `postmaster.pid`) and
    /// its children. Empty when it is not running.
    pub fn server_pids(&self) -> Vec<u32> {
        let Some(postmaster) = fs::read_to_string(self.data_dir().join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next()?.trim().parse::<u32>().ok())
        else {
            return Vec::new();
        };
        let children = fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
                let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
                // The parent pid is the second field after the command,
                // which is in parentheses and may hold spaces.
                let after = stat.rsplit_once(')')?.1;
                let ppid = after.split_whitespace().nth(1)?.parse::<u32>().ok()?;
                (ppid == postmaster).then_some(pid)
            });
        std::iter::once(postmaster).chain(children).collect()
    }

    /// Whether the server is running (`pg_ctl status`).
    pub fn is_running(&self) -> bool {
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data_dir().as_os_str(),
                "status".as_ref(),
            ],
        )
        .is_ok()
    }

    /// Waits until the server accepts connections, up to `timeout`.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), ServerError> {
        let url = self.url("postgres");
        let deadline = Instant::now() + timeout;
        loop {
            match PgConnection::establish(&with_connect_timeout(&url)) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(ServerError::Unreachable {
                        url,
                        reason: e.to_string(),
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Hands `path` to the user the cluster runs as (when running as root).
    fn give_to_owner(&self, path: &Path) -> Result<(), ServerError> {
        match &self.run_as {
            Some(user) => chown(user, path),
            None => Ok(()),
        }
    }

    /// Runs a PostgreSQL program from the cluster's bin dir, as the
    /// cluster's user.
    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<Output, ServerError> {
        let path = self.bin_dir.join(program);
        let mut command = command_as(self.run_as.as_deref(), &path);
        command
            .args(args)
            .current_dir(&self.base)
            .env_remove("PGDATA");
        let output = command
            .output()
            .map_err(io(format!("running {}", path.display())))?;
        if output.status.success() {
            Ok(output)
        } else {
            let rendered: Vec<String> = args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            Err(ServerError::Command {
                command: format!("{program} {}", rendered.join(" ")),
                status: output.status.to_string(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                )
                .trim()
                .to_owned(),
            })
        }
    }
}

/// `program` to run as the user private clusters run as, with `dir` handed
/// to that user first: `nobody` when this process is root (PostgreSQL and
/// PgBouncer refuse to run as root), else this process's own user. For the
/// tests' other servers (a PgBouncer).
pub fn unprivileged_command(program: &Path, dir: &Path) -> Result<Command, ServerError> {
    let user = unprivileged_user()?;
    if let Some(user) = user {
        chown(user, dir)?;
    }
    Ok(command_as(user, program))
}

/// The user private clusters and the tests' other servers run as: `nobody`
/// when this process is root, else (none) this process's own user.
fn unprivileged_user() -> Result<Option<&'static str>, ServerError> {
    Ok(is_root()?.then_some("nobody"))
}

/// `program` run as `user` (through `setpriv`), or as this process's user.
fn command_as(user: Option<&str>, program: &Path) -> Command {
    match user {
        Some(user) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={user}"))
                .arg(format!("--regid={}", group_of(user)))
                .arg("--clear-groups")
                .arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// `chown -R user path`.
fn chown(user: &str, path: &Path) -> Result<(), ServerError> {
    let status = Command::new("chown")
        .arg("-R")
        .arg(user)
        .arg(path)
        .status()
        .map_err(io("running chown"))?;
    if !status.success() {
        return Err(ServerError::Command {
            command: format!("chown -R {user} {}", path.display()),
            status: status.to_string(),
            output: String::new(),
        });
    }
    Ok(())
}

/// The primary group of `user` (`nogroup` for `nobody` on Debian).
fn group_of(user: &str) -> String {
    Command::new("id")
        .arg("-g")
        .arg(user)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "65534".to_owned())
}

fn is_root() -> Result<bool, ServerError> {
    // /proc/self belongs to the process's effective user.
    let meta = fs::metadata("/proc/self").map_err(io("reading /proc/self"))?;
    Ok(meta.uid() == 0)
}

/// Whether the PostgreSQL server this machine's binaries start can load
/// the shared library `name` (a contrib module such as
/// `pg_stat_statements`): the binaries' `../lib/<name>.so`, as Debian's
/// and PostgreSQL's own packages lay them out.
pub fn server_has_library(name: &str) -> bool {
    find_bin_dir().is_some_and(|bin| {
        bin.parent()
            .is_some_and(|dir| dir.join("lib").join(format!("{name}.so")).is_file())
    })
}

/// The newest directory holding `initdb`, `pg_ctl` and `postgres`.
fn find_bin_dir() -> Option<PathBuf> {
    let complete = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|p| dir.join(p).is_file())
    };
    if let Ok(dir) = std::env::var("PG_BIN_DIR") {
        let dir = PathBuf::from(dir);
        if complete(&dir) {
            return Some(dir);
        }
    }
    let mut versioned: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| complete(dir))
        .collect();
    versioned.sort();
    if let Some((_, dir)) = versioned.pop() {
        return Some(dir);
    }
    let fallback = PathBuf::from("/usr/local/pgsql/bin");
    if complete(&fallback) {
        return Some(fallback);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|dir| complete(dir))
}

/// A free TCP port on 127.0.0.1 (for a throwaway cluster).
pub fn free_port() -> Result<u16, ServerError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port"))?;
    let port = listener
        .local_addr()
        .map_err(io("finding a free port"))?
        .port();
    Ok(port)
}

/// A [`PrivateCluster`] made for one use, on a free port, under a directory
/// of its own in the system temp directory: stopped (immediately) and
/// deleted when dropped. For the bench's `--own-cluster` and for tests
/// that stop, crash or promote their server.
#[derive(Debug)]
pub struct ThrowawayCluster {
    cluster: PrivateCluster,
    base: PathBuf,
}

impl ThrowawayCluster {
    /// A cluster to be run with `settings` (see
    /// [`PrivateCluster::with_setting`]) on top of PostgreSQL's defaults, in
    /// a directory named after `purpose` (`jobqueue-<purpose>-<port>-<pid>`);
    /// nothing is started or initialized yet (a standby is made from a base
    /// backup instead: [`PrivateCluster::clone_as_standby`]).
    pub fn new(purpose: &str, settings: &[(&str, &str)]) -> Result<Self, ServerError> {
        let port = free_port()?;
        let base =
            std::env::temp_dir().join(format!("jobqueue-{purpose}-{port}-{}", std::process::id()));
        let mut cluster = PrivateCluster::new(&base, port)?;
        for (name, value) in settings {
            cluster = cluster.with_setting(name, value);
        }
        Ok(ThrowawayCluster { cluster, base })
    }

    /// [`ThrowawayCluster::new`], initialized and started.
    pub fn start(purpose: &str, settings: &[(&str, &str)]) -> Result<Self, ServerError> {
        // Made before starting, so a failed start is cleaned up too.
        let own = Self::new(purpose, settings)?;
        own.cluster.ensure_running()?;
        Ok(own)
    }

    /// A streaming standby of `primary` (running), in a directory named
    /// after `purpose`: copied with `pg_basebackup -R`, naming itself
    /// `application_name` to the primary, started, and waited for until
    /// the primary streams to it. Synchronous once the primary requires it
    /// ([`PrivateCluster::require_sync`]).
    pub fn standby_of(
        primary: &PrivateCluster,
        purpose: &str,
        application_name: &str,
    ) -> Result<Self, ServerError> {
        let standby = Self::new(purpose, &[])?;
        standby
            .cluster
            .clone_as_standby(primary, application_name)?;
        standby.cluster.start()?;
        standby.cluster.wait_ready(Duration::from_secs(30))?;
        primary.wait_replication(application_name, "state = 'streaming'")?;
        Ok(standby)
    }

    /// The cluster, to stop and start.
    pub fn cluster(&self) -> &PrivateCluster {
        &self.cluster
    }

    /// URL of database `database` on it, as user `postgres`.
    pub fn url(&self, database: &str) -> String {
        self.cluster.url(database)
    }
}

impl Drop for ThrowawayCluster {
    fn drop(&mut self) {
        if self.cluster.is_running() {
            let _ = self.cluster.stop(StopMode::Immediate);
        }
        let _ = fs::remove_dir_all(&self.base);
        let _ = fs::remove_file(self.base.with_extension("lock"));
    }
}
