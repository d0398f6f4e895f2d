//! The object's user variables from its `variablesFrom` sources and its
//! inline variables.

use kube::ResourceExt;

use super::workload::Workload;
use super::{Context, Error};
use crate::engine::job_conditions::ConditionValue;

/// The object's user variables: its `variablesFrom` sources read live
/// (only those labeled `captf.io/variables=true` count), then its inline
/// variables. `Ok(Err)` is the `DependenciesReady` to report.
pub async fn variables<K: Workload>(
    ctx: &Context,
    obj: &K,
    role: captf_contract::Role,
) -> Result<Result<captf_contract::UserVariables, ConditionValue>, Error> {
    let sources = variable_sources(ctx, obj).await?;
    Ok(crate::adapters::variables::merge(
        role,
        obj.workspace().variables.as_ref(),
        &sources,
    ))
}

/// The sources read for the variables.
pub type VariableSources = Vec<(
    captf_api::common::VariablesSource,
    Option<crate::adapters::variables::SourceData>,
)>;

/// The object's `variablesFrom` sources, read live; one without the
/// `captf.io/variables=true` label reads as missing.
pub async fn variable_sources<K: Workload>(
    ctx: &Context,
    obj: &K,
) -> Result<VariableSources, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let sources = obj.workspace().variables_from.clone().unwrap_or_default();
    read_variable_sources(ctx, &ns, &sources).await
}

/// `sources` of namespace `ns`, read live; one without the
/// `captf.io/variables=true` label reads as missing.
pub async fn read_variable_sources(
    ctx: &Context,
    ns: &str,
    sources: &[captf_api::common::VariablesSource],
) -> Result<VariableSources, Error> {
    use crate::adapters::variables::SourceData;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let ns = ns.to_owned();
    let labeled = |labels: Option<&std::collections::BTreeMap<String, String>>| {
        labels
            .and_then(|l| l.get(captf_api::names::labels::VARIABLES))
            .is_some_and(|v| v == "true")
    };
    let mut read = Vec::new();
    for source in sources {
        let data = if let Some(r) = &source.config_map_ref {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(&r.name)
                .await?
                .filter(|c| labeled(c.metadata.labels.as_ref()))
                .map(|c| {
                    let mut d: std::collections::BTreeMap<String, Vec<u8>> = c
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.into_bytes()))
                        .collect();
                    for (k, v) in c.binary_data.unwrap_or_default() {
                        d.insert(k, v.0);
                    }
                    SourceData(d)
                })
        } else if let Some(r) = &source.secret_ref {
            let api: kube::Api<Secret> = kube::Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(&r.name)
                .await?
                .filter(|s| labeled(s.metadata.labels.as_ref()))
                .map(|s| {
                    SourceData(
                        s.data
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(k, v)| (k, v.0))
                            .collect(),
                    )
                })
        } else {
            None
        };
        read.push((source.clone(), data));
    }
    Ok(read)
}
