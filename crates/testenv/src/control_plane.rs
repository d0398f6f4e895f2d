//! A local control plane: etcd, kube-apiserver and kube-controller-manager on
//! free loopback ports, with their state, certificates and logs in one
//! temporary folder.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::Error;
use crate::assets;
use crate::pki::Pki;
use crate::process::Process;

/// The controllers a test cluster needs: garbage collection, namespace
/// deletion, Jobs and their TTL, Deployments and their ReplicaSets (the
/// provider's own manager, installed from its components), and service
/// accounts (pods need the namespace's `default` one) with their tokens
/// and root CA.
pub const CONTROLLERS: &[&str] = &[
    "garbage-collector-controller",
    "namespace-controller",
    "job-controller",
    "ttl-after-finished-controller",
    "deployment-controller",
    "replicaset-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
];

/// The Services' range, and the `kubernetes` Service's ClusterIP (its
/// first address), which the serving certificate names.
const SERVICE_RANGE: &str = "10.0.0.0/24";
const SERVICE_IP: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

/// The host's address on its default route (no packet is sent: connecting
/// a UDP socket only picks the route); `None` without one.
pub fn host_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.123:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

const START_TIMEOUT: Duration = Duration::from_secs(90);
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct ControlPlane {
    pub root: PathBuf,
    pub kubeconfig: PathBuf,
    /// The admin kubeconfig with inline certificates (for `<cluster>-kubeconfig` Secrets).
    pub inline_kubeconfig: String,
    /// Started order: etcd, kube-apiserver, kube-controller-manager.
    pub processes: Vec<Process>,
}

/// The lowest and one past the highest port [`free_port`] hands out: below
/// Linux's ephemeral range (32768-60999), where the kernel picks the source
/// ports of outgoing connections and the ports of `bind(0)`. A port taken from
/// that range and released before etcd binds it could meanwhile become the
/// source port of any client connection; below it, only an explicit bind can
/// take it.
const PORT_RANGE: (u16, u16) = (20000, 32768);

/// The next port to try, shared by every control plane and Cluster API manager
/// of this process so that none is handed out twice.
static NEXT_PORT: std::sync::Mutex<Option<u16>> = std::sync::Mutex::new(None);

/// A loopback port nothing listens on, for a process about to bind it.
pub(crate) fn free_port() -> Result<u16, Error> {
    let (low, high) = PORT_RANGE;
    let span = high - low;
    let mut next = NEXT_PORT.lock().unwrap_or_else(|p| p.into_inner());
    // Start where another test process (with another pid) is unlikely to be.
    let start = *next.get_or_insert(low + (std::process::id() % u32::from(span)) as u16);
    for step in 0..span {
        let port = low + (start - low + step) % span;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            *next = Some(low + (port - low + 1) % span);
            return Ok(port);
        }
    }
    Err(Error::io(
        "finding a free port",
        std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "every port of the range is taken",
        ),
    ))
}

/// Whether a start failed because a port was taken between its choice and
/// its bind, which a second attempt with other ports gets past.
pub(crate) fn lost_port_race(error: &Error) -> bool {
    matches!(error, Error::NotReady { logs, .. } if logs.contains("address already in use"))
}

fn mkdir(path: PathBuf) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(&path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    Ok(path)
}

fn kubeconfig_yaml(server: &str, pki: &Pki) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         users:\n- name: admin\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n\
         contexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: admin\ncurrent-context: testenv\n",
        ca = pki.ca_cert.display(),
        cert = pki.admin_cert.display(),
        key = pki.admin_key.display(),
    )
}

/// The same admin kubeconfig with the certificates inline: what Cluster API
/// keeps in a workload cluster's `<cluster>-kubeconfig` Secret, which has no
/// files to point at.
fn inline_kubeconfig_yaml(server: &str, pki: &Pki) -> Result<String, Error> {
    use base64::Engine as _;
    let read = |path: &Path| {
        std::fs::read(path)
            .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes))
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))
    };
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
         contexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: admin\ncurrent-context: testenv\n",
        ca = read(&pki.ca_cert)?,
        cert = read(&pki.admin_cert)?,
        key = read(&pki.admin_key)?,
    ))
}

/// A client configuration read from a kubeconfig file.
pub async fn config_from(kubeconfig: &Path) -> Result<kube::Config, Error> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))
}

impl ControlPlane {
    /// Starts the three processes under `root` and waits until the apiserver
    /// is ready and the controller manager is doing its work.
    ///
    /// Must run on a thread that outlives the control plane (see
    /// [`Process::start`]).
    pub async fn start(root: &Path) -> Result<ControlPlane, Error> {
        let etcd_bin = assets::control_plane_binary("etcd")?;
        let apiserver_bin = assets::control_plane_binary("kube-apiserver")?;
        let kcm_bin = assets::control_plane_binary("kube-controller-manager")?;

        let logs = mkdir(root.join("logs"))?;
        let host = host_address();
        let serving_ips: Vec<std::net::IpAddr> = host.iter().copied().chain([SERVICE_IP]).collect();
        let pki = Pki::write(&mkdir(root.join("pki"))?, &serving_ips)?;
        let mut cp = ControlPlane {
            root: root.to_owned(),
            kubeconfig: root.join("kubeconfig"),
            inline_kubeconfig: String::new(),
            processes: Vec::new(),
        };

        let (client_port, peer_port) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args = vec![
            "--name=testenv".to_owned(),
            format!("--data-dir={}", root.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=testenv={peer_url}"),
            // Durability is worthless for a throwaway cluster; speed is not.
            "--unsafe-no-fsync=true".to_owned(),
            "--log-level=warn".to_owned(),
        ];
        cp.processes
            .push(Process::start("etcd", &etcd_bin, &etcd_args, &logs)?);

        let secure_port = free_port()?;
        let server = format!("https://127.0.0.1:{secure_port}");
        // Pods of a real node reach the apiserver through the `kubernetes`
        // Service, whose endpoint is the advertised address: the host's
        // own, listened on beside loopback. Without one (no route), only
        // loopback, and the Service has no endpoint.
        let (bind, advertise, reconciler) = match host {
            Some(ip) => ("0.0.0.0".to_owned(), ip.to_string(), "lease"),
            None => ("127.0.0.1".to_owned(), "127.0.0.1".to_owned(), "none"),
        };
        let apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--bind-address={bind}"),
            format!("--advertise-address={advertise}"),
            format!("--secure-port={secure_port}"),
            format!("--cert-dir={}", mkdir(root.join("apiserver"))?.display()),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            format!(
                "--service-account-key-file={}",
                pki.service_account_pub.display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                pki.service_account_key.display()
            ),
            format!("--service-cluster-ip-range={SERVICE_RANGE}"),
            "--authorization-mode=RBAC".to_owned(),
            "--allow-privileged=true".to_owned(),
            format!("--endpoint-reconciler-type={reconciler}"),
            // Logs and exec through a real node's kubelet, by its address.
            "--kubelet-preferred-address-types=InternalIP".to_owned(),
            "--enable-priority-and-fairness=false".to_owned(),
        ];
        cp.processes.push(Process::start(
            "kube-apiserver",
            &apiserver_bin,
            &apiserver_args,
            &logs,
        )?);

        std::fs::write(&cp.kubeconfig, kubeconfig_yaml(&server, &pki))
            .map_err(|e| Error::io("writing the kubeconfig", e))?;
        cp.inline_kubeconfig = inline_kubeconfig_yaml(&server, &pki)?;
        let client = kube::Client::try_from(config_from(&cp.kubeconfig).await?)?;
        cp.wait_ready(&client).await?;

        let kcm_args = vec![
            format!("--kubeconfig={}", cp.kubeconfig.display()),
            format!("--controllers={}", CONTROLLERS.join(",")),
            format!(
                "--service-account-private-key-file={}",
                pki.service_account_key.display()
            ),
            format!("--root-ca-file={}", pki.ca_cert.display()),
            "--leader-elect=false".to_owned(),
            // No serving endpoint: nothing scrapes it, and it needs no port.
            "--secure-port=0".to_owned(),
        ];
        cp.processes.push(Process::start(
            "kube-controller-manager",
            &kcm_bin,
            &kcm_args,
            &logs,
        )?);
        cp.wait_controllers(&client).await?;
        Ok(cp)
    }

    fn check_running(&mut self, waiting_for: &str) -> Result<(), Error> {
        for p in &mut self.processes {
            if let Some(status) = p.exited() {
                return Err(Error::NotReady {
                    what: format!("{waiting_for}: {} exited with {status}", p.name),
                    logs: p.log_tail(40),
                });
            }
        }
        Ok(())
    }

    async fn wait_ready(&mut self, client: &kube::Client) -> Result<(), Error> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.check_running("kube-apiserver readiness")?;
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("static request");
            match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                _ if Instant::now() > deadline => {
                    return Err(Error::NotReady {
                        what: format!("kube-apiserver not ready after {START_TIMEOUT:?}"),
                        logs: self.processes[1].log_tail(40),
                    });
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// The service-account controller creating `default/default` shows the
    /// controller manager is connected and running its controllers.
    async fn wait_controllers(&mut self, client: &kube::Client) -> Result<(), Error> {
        let deadline = Instant::now() + START_TIMEOUT;
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        loop {
            self.check_running("kube-controller-manager start")?;
            if let Ok(Some(_)) = sas.get_opt("default").await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    what: format!(
                        "kube-controller-manager made no default ServiceAccount after {START_TIMEOUT:?}"
                    ),
                    logs: self.processes[2].log_tail(40),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the processes in reverse order of start.
    pub fn stop(&mut self) {
        for p in self.processes.iter_mut().rev() {
            p.stop(STOP_GRACE);
        }
    }

    /// The last lines of every process's log, for a failing test.
    pub fn logs(&self, lines: usize) -> String {
        self.processes
            .iter()
            .map(|p| {
                format!(
                    "----- {} ({}) -----\n{}\n",
                    p.name,
                    p.log.display(),
                    p.log_tail(lines)
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_outside_the_ephemeral_range() {
        let held = TcpListener::bind(("127.0.0.1", free_port().unwrap())).unwrap();
        let mut seen = vec![held.local_addr().unwrap().port()];
        for _ in 0..50 {
            let port = free_port().unwrap();
            assert!((PORT_RANGE.0..PORT_RANGE.1).contains(&port), "{port}");
            assert!(!seen.contains(&port), "{port} handed out twice");
            seen.push(port);
        }
    }

    #[test]
    fn only_a_bind_failure_is_worth_a_second_start() {
        let lost = Error::NotReady {
            what: "etcd exited".into(),
            logs: "listen tcp 127.0.0.1:20001: bind: address already in use".into(),
        };
        let other = Error::NotReady {
            what: "etcd exited".into(),
            logs: "permission denied".into(),
        };
        assert!(lost_port_race(&lost));
        assert!(!lost_port_race(&other));
    }
}
