//! Pod status as a kubelet would report it, built from what the executor
//! observed. Pure: the caller sends the result as a status patch.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Kubernetes keeps at most this much of a termination message.
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;

/// What happened to one container so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// Not started: its image is not in the image map (`ErrImagePull`), or
    /// its configuration cannot be built (`CreateContainerConfigError`).
    Waiting {
        reason: String,
        message: String,
    },
    Running {
        started: Timestamp,
    },
    Exited {
        started: Timestamp,
        finished: Timestamp,
        exit_code: i32,
        message: String,
    },
}

/// One container's slot in the pod status.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerReport {
    pub name: String,
    pub image: String,
    /// `<repository>@sha256:<digest>`, as a runtime reports the pulled image.
    pub image_id: String,
    pub observed: Observed,
}

fn truncate_message(message: &str) -> String {
    if message.len() <= TERMINATION_MESSAGE_LIMIT {
        return message.to_owned();
    }
    let mut end = TERMINATION_MESSAGE_LIMIT;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_owned()
}

fn container_status(report: &ContainerReport) -> ContainerStatus {
    let (state, ready, image_id) = match &report.observed {
        Observed::Waiting { reason, message } => (
            ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.clone()),
                    message: Some(message.clone()),
                }),
                ..Default::default()
            },
            false,
            String::new(),
        ),
        Observed::Running { started } => (
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(*started)),
                }),
                ..Default::default()
            },
            true,
            report.image_id.clone(),
        ),
        Observed::Exited {
            started,
            finished,
            exit_code,
            message,
        } => (
            ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: *exit_code,
                    reason: Some(
                        if *exit_code == 0 {
                            "Completed"
                        } else {
                            "Error"
                        }
                        .to_owned(),
                    ),
                    message: (!message.is_empty()).then(|| truncate_message(message)),
                    started_at: Some(Time(*started)),
                    finished_at: Some(Time(*finished)),
                    ..Default::default()
                }),
                ..Default::default()
            },
            false,
            report.image_id.clone(),
        ),
    };
    ContainerStatus {
        name: report.name.clone(),
        image: report.image.clone(),
        image_id,
        ready,
        restart_count: 0,
        started: Some(matches!(report.observed, Observed::Running { .. })),
        state: Some(state),
        ..Default::default()
    }
}

/// The pod phase a kubelet reports for a `restartPolicy: Never` pod.
pub fn phase(init: &[ContainerReport], main: &[ContainerReport]) -> &'static str {
    let failed = |r: &ContainerReport| matches!(r.observed, Observed::Exited { exit_code, .. } if exit_code != 0);
    let exited = |r: &ContainerReport| matches!(r.observed, Observed::Exited { .. });
    if init.iter().chain(main).any(failed) {
        return "Failed";
    }
    if !main.is_empty() && main.iter().all(exited) {
        return "Succeeded";
    }
    if main
        .iter()
        .any(|r| matches!(r.observed, Observed::Running { .. }))
    {
        return "Running";
    }
    "Pending"
}

/// The status of a pod whose containers are `init` and `main` (so far).
pub fn pod_status(
    init: &[ContainerReport],
    main: &[ContainerReport],
    host_ip: &str,
    started: Timestamp,
) -> PodStatus {
    PodStatus {
        phase: Some(phase(init, main).to_owned()),
        host_ip: Some(host_ip.to_owned()),
        pod_ip: Some(host_ip.to_owned()),
        start_time: Some(Time(started)),
        init_container_statuses: (!init.is_empty())
            .then(|| init.iter().map(container_status).collect()),
        container_statuses: Some(main.iter().map(container_status).collect()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn report(name: &str, observed: Observed) -> ContainerReport {
        ContainerReport {
            name: name.into(),
            image: "example.com/m:1".into(),
            image_id: "example.com/m@sha256:ab".into(),
            observed,
        }
    }

    fn exited(code: i32) -> Observed {
        Observed::Exited {
            started: at(1),
            finished: at(2),
            exit_code: code,
            message: String::new(),
        }
    }

    #[test]
    fn phase_follows_the_containers() {
        let running = Observed::Running { started: at(1) };
        let cases: Vec<(Vec<Observed>, Vec<Observed>, &str)> = vec![
            (vec![], vec![], "Pending"),
            (vec![exited(0)], vec![], "Pending"),
            (vec![exited(1)], vec![], "Failed"),
            (vec![exited(0)], vec![running.clone()], "Running"),
            (vec![exited(0)], vec![exited(0)], "Succeeded"),
            (vec![exited(0)], vec![exited(2)], "Failed"),
            (
                vec![],
                vec![Observed::Waiting {
                    reason: "ErrImagePull".into(),
                    message: "x".into(),
                }],
                "Pending",
            ),
        ];
        for (init, main, want) in cases {
            let init: Vec<_> = init.into_iter().map(|o| report("i", o)).collect();
            let main: Vec<_> = main.into_iter().map(|o| report("m", o)).collect();
            assert_eq!(phase(&init, &main), want, "init {init:?} main {main:?}");
        }
    }

    #[test]
    fn a_terminated_container_carries_code_reason_and_bounded_message() {
        let long = "é".repeat(3000); // 6000 bytes
        let r = report(
            "source",
            Observed::Exited {
                started: at(1),
                finished: at(5),
                exit_code: 1,
                message: long,
            },
        );
        let status = pod_status(&[], &[r], "127.0.0.1", at(0));
        let cs = &status.container_statuses.unwrap()[0];
        let t = cs.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(t.exit_code, 1);
        assert_eq!(t.reason.as_deref(), Some("Error"));
        let msg = t.message.as_ref().unwrap();
        assert!(msg.len() <= TERMINATION_MESSAGE_LIMIT && msg.len() > 4000);
        assert_eq!(cs.image_id, "example.com/m@sha256:ab");
        assert_eq!(status.phase.as_deref(), Some("Failed"));
    }

    #[test]
    fn a_missing_image_waits_in_err_image_pull_without_an_image_id() {
        let r = report(
            "source",
            Observed::Waiting {
                reason: "ErrImagePull".into(),
                message: "not in the image map".into(),
            },
        );
        let status = pod_status(&[], &[r], "127.0.0.1", at(0));
        let cs = &status.container_statuses.unwrap()[0];
        let w = cs.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(w.reason.as_deref(), Some("ErrImagePull"));
        assert!(cs.image_id.is_empty());
    }
}
