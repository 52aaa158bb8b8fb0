//! `jobqueue dashboard`: the web dashboard on its own HTTP server until
//! SIGINT or SIGTERM.

use std::net::SocketAddr;

use jobqueue_dashboard::{Dashboard, DashboardConfig, DashboardError};

use crate::CliError;

type Result<T, E = CliError> = std::result::Result<T, E>;

/// `jobqueue dashboard`.
#[derive(Debug, clap::Args)]
pub(crate) struct DashboardArgs {
    /// Address to serve on. Anything but a loopback address needs --token.
    #[arg(
        long,
        env = "JOBQUEUE_DASHBOARD_ADDR",
        default_value = "127.0.0.1:8080"
    )]
    addr: SocketAddr,
    /// The access token a browser must present (open /login?token=TOKEN
    /// once), at least 16 characters. Required off loopback.
    #[arg(long, env = "JOBQUEUE_DASHBOARD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A secret the forms' CSRF token is derived from, the same for every
    /// replica behind one address (at least 32 characters); each dashboard
    /// draws its own when absent.
    #[arg(long, env = "JOBQUEUE_DASHBOARD_CSRF_SECRET", hide_env_values = true)]
    csrf_secret: Option<String>,
    /// Show, never act: no action buttons, and every action refused.
    #[arg(long)]
    read_only: bool,
    /// A host name the dashboard answers to, `name` (any port) or
    /// `name:port`; repeat for several (the variable takes them separated
    /// by commas). It always answers to localhost, 127.0.0.1 and [::1] and
    /// to the address it is bound to (any IP address when bound to
    /// 0.0.0.0); any other Host gets 421, which keeps pages of other sites
    /// out (DNS rebinding). Name here what people type to reach it.
    #[arg(
        long = "allowed-host",
        value_name = "HOST",
        env = "JOBQUEUE_DASHBOARD_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
}

pub(crate) fn run(url: &str, args: DashboardArgs, name: &str) -> Result<()> {
    let mut config = DashboardConfig::new(url);
    config.read_only = args.read_only;
    config.access_token = args.token;
    config.csrf_secret = args.csrf_secret;
    config.allowed_hosts = args.allowed_hosts;
    let token = config.access_token.is_some();
    let dashboard = Dashboard::new(config).map_err(usage)?;
    // The handlers before the server and its start line: a signal sent as
    // soon as the line is out stops the server in order.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(CliError::Signals)?;
    let server = jobqueue_dashboard::serve(dashboard, args.addr).map_err(usage)?;
    eprintln!(
        "{name}: dashboard at http://{}/ ({}; {})",
        server.addr(),
        if args.read_only {
            "read-only"
        } else {
            "actions enabled"
        },
        if token {
            "access token required: open /login?token=... once"
        } else {
            "no access token: reachable from this machine only"
        }
    );
    if let Some(signal) = signals.forever().next() {
        log::info!("signal {signal}: stopping the dashboard");
    }
    server.shutdown();
    Ok(())
}

/// A dashboard that cannot start for want of a setting is a wrong command
/// line; one whose database or address fails is not.
fn usage(error: DashboardError) -> CliError {
    match error {
        DashboardError::NeedsToken(_)
        | DashboardError::WeakToken(_)
        | DashboardError::WeakCsrfSecret(_)
        | DashboardError::AllowedHost(_) => CliError::Usage(error.to_string()),
        DashboardError::Queue(e) => CliError::Queue(e),
        other => CliError::Refused(other.to_string()),
    }
}
