//! Rendering of the generated root module: `main.tf.json` (backend stub,
//! variables, the `role` module call, re-exported outputs) and
//! `terraform.tfvars.json` (the values). Both are byte-stable: the same inputs
//! always give the same bytes.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::Role;
use crate::go_json::{compact, indent, push_go_string};
use crate::input_specs::input_specs;
use crate::inputs::{InputsError, RoleInputs};
use crate::json_text::JsonText;
use crate::names::{input_names, required_outputs};
use crate::raw_json::{Node, node};
use crate::variables::{UserVariable, UserVariables, VariableError};

/// File name of the generated root module.
pub const MAIN_TF_JSON: &str = "main.tf.json";
/// File name of the rendered values.
pub const TFVARS_JSON: &str = "terraform.tfvars.json";
/// Label of the module block in the generated root.
pub const MODULE_NAME: &str = "role";
/// Where the root finds the module, relative to the root folder (the root is
/// `/captf/work/root`, the module `/captf/module`).
pub const MODULE_SOURCE: &str = "../../module";
/// Most bytes `main.tf.json` and `terraform.tfvars.json` may hold together
/// (what one Secret can carry).
pub const MAX_RENDERED_BYTES: usize = 1_000_000;

/// The two rendered files.
#[derive(Clone, PartialEq, Eq)]
pub struct RenderedRoot {
    /// Contents of `main.tf.json`.
    pub main_tf_json: String,
    /// Contents of `terraform.tfvars.json` (holds secrets in clear).
    pub tfvars_json: String,
}

impl RenderedRoot {
    /// Combined size in bytes, as counted against [`MAX_RENDERED_BYTES`].
    pub fn size(&self) -> usize {
        self.main_tf_json.len() + self.tfvars_json.len()
    }

    /// The files as `(file name, contents)` pairs.
    pub fn files(&self) -> [(&'static str, &str); 2] {
        [
            (MAIN_TF_JSON, self.main_tf_json.as_str()),
            (TFVARS_JSON, self.tfvars_json.as_str()),
        ]
    }
}

impl std::fmt::Debug for RenderedRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // tfvars carries bootstrap data and variable values.
        f.debug_struct("RenderedRoot")
            .field("main_tf_json", &self.main_tf_json)
            .field(
                "tfvars_json",
                &format_args!("<{} bytes>", self.tfvars_json.len()),
            )
            .finish()
    }
}

/// Why the root cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Inputs(#[from] InputsError),
    #[error(transparent)]
    Variable(#[from] VariableError),
    /// The rendered files exceed [`MAX_RENDERED_BYTES`]; `size` is what they
    /// would have taken.
    #[error("rendered inputs are {size} bytes, more than the limit of {limit} bytes")]
    InputsTooLarge { size: usize, limit: usize },
}

#[derive(Serialize)]
struct MainTf<'a> {
    terraform: Terraform,
    #[serde(skip_serializing_if = "Option::is_none")]
    variable: Option<BTreeMap<&'a str, VariableBlock<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<BTreeMap<&'static str, BTreeMap<&'a str, String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<BTreeMap<&'a str, OutputBlock>>,
}

#[derive(Serialize)]
struct Terraform {
    backend: BTreeMap<&'static str, BTreeMap<String, String>>,
}

impl Terraform {
    fn kubernetes() -> Self {
        Terraform {
            backend: BTreeMap::from([("kubernetes", BTreeMap::new())]),
        }
    }
}

#[derive(Serialize)]
struct VariableBlock<'a> {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    type_expr: Option<&'a str>,
    /// `Some(())` writes `"default": null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<()>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    sensitive: bool,
}

#[derive(Serialize)]
struct OutputBlock {
    value: String,
    sensitive: bool,
}

/// The values file: an object with the members in the order given, each
/// value as written, indented as Go's JSON encoder indents (two spaces, a
/// trailing newline).
fn values_file(members: &[(&str, &JsonText)]) -> String {
    let mut object = String::from("{");
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            object.push(',');
        }
        push_go_string(&mut object, name);
        object.push(':');
        object.push_str(value.as_str());
    }
    object.push('}');
    let mut out = indent(&object);
    out.push('\n');
    out
}

/// Pretty JSON with two-space indentation and a trailing newline.
fn pretty<T: Serialize>(value: &T) -> String {
    let mut out = serde_json::to_string_pretty(value).expect("rendering JSON");
    out.push('\n');
    out
}

/// Renders the root module and values for `inputs` plus `variables`.
///
/// `main.tf.json` depends only on the role and on the names and sensitivity
/// of the variables, never on values.
pub fn render_root(
    inputs: &RoleInputs,
    variables: &UserVariables,
) -> Result<RenderedRoot, RenderError> {
    inputs.validate()?;
    let role = inputs.role();
    variables.check(role)?;

    let mut variable = BTreeMap::new();
    let mut arguments = BTreeMap::new();
    for spec in input_specs(role) {
        variable.insert(
            spec.name,
            VariableBlock {
                type_expr: Some(spec.type_expr),
                default: spec.nullable.then_some(()),
                sensitive: spec.sensitive,
            },
        );
        arguments.insert(spec.name, format!("${{var.{}}}", spec.name));
    }
    for (name, var) in variables.iter() {
        variable.insert(
            name,
            VariableBlock {
                type_expr: None,
                default: None,
                sensitive: var.sensitive,
            },
        );
        arguments.insert(name, format!("${{var.{name}}}"));
    }
    arguments.insert("source", MODULE_SOURCE.to_owned());
    let output = required_outputs(role)
        .iter()
        .map(|name| {
            (
                *name,
                OutputBlock {
                    value: format!("${{module.{MODULE_NAME}.{name}}}"),
                    sensitive: true,
                },
            )
        })
        .collect();
    let main = MainTf {
        terraform: Terraform::kubernetes(),
        variable: Some(variable),
        module: Some(BTreeMap::from([(MODULE_NAME, arguments)])),
        output: Some(output),
    };

    let fields = inputs.fields();
    let mut values: Vec<(&str, &JsonText)> = fields.iter().map(|(k, v)| (*k, v)).collect();
    if !variables.is_empty() {
        // With user variables the top-level keys are sorted; without, the
        // contract's order is kept. Values keep their own order inside.
        values.extend(variables.iter().map(|(k, v)| (k, &v.value)));
        values.sort_by(|a, b| a.0.cmp(b.0));
    }

    let rendered = RenderedRoot {
        main_tf_json: pretty(&main),
        tfvars_json: values_file(&values),
    };
    let size = rendered.size();
    if size > MAX_RENDERED_BYTES {
        return Err(RenderError::InputsTooLarge {
            size,
            limit: MAX_RENDERED_BYTES,
        });
    }
    Ok(rendered)
}

/// Renders the root a state restore uses: the backend stub only, no module,
/// no variables, and empty values.
pub fn render_backend_root() -> RenderedRoot {
    let main = MainTf {
        terraform: Terraform::kubernetes(),
        variable: None,
        module: None,
        output: None,
    };
    RenderedRoot {
        main_tf_json: pretty(&main),
        tfvars_json: "{}\n".to_owned(),
    }
}

/// Why recorded root files cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseRootError {
    #[error("{file}: not a JSON object")]
    NotAnObject { file: &'static str },
    #[error("{file}: input {name:?} is missing")]
    MissingInput {
        file: &'static str,
        name: &'static str,
    },
    #[error("{TFVARS_JSON}: variable {name:?} is not declared in {MAIN_TF_JSON}")]
    UndeclaredVariable { name: String },
    #[error(transparent)]
    Inputs(#[from] InputsError),
    #[error(transparent)]
    Variable(#[from] VariableError),
}

/// Reads recorded root files (e.g. an inputs record) back into the inputs of
/// `role` and the user variables, with each variable's sensitivity taken from
/// its declaration in `main.tf.json`. Rendering the result gives the same
/// files again, so recorded inputs can be hashed and compared.
pub fn parse_rendered_root(
    role: Role,
    root: &RenderedRoot,
) -> Result<(RoleInputs, UserVariables), ParseRootError> {
    let main = match serde_json::from_str::<Value>(&root.main_tf_json) {
        Ok(Value::Object(map)) => map,
        _ => return Err(ParseRootError::NotAnObject { file: MAIN_TF_JSON }),
    };
    // The values are read as written (only the indentation is dropped), so
    // numbers keep their literal text and the inputs re-hash exactly as they
    // were hashed.
    let mut values = top_level_members(&root.tfvars_json)?;
    let declared = main
        .get("variable")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();

    let mut inputs = String::from("{");
    for (i, name) in input_names(role).iter().enumerate() {
        let value = values.remove(*name).ok_or(ParseRootError::MissingInput {
            file: TFVARS_JSON,
            name,
        })?;
        if i > 0 {
            inputs.push(',');
        }
        push_go_string(&mut inputs, name);
        inputs.push(':');
        inputs.push_str(&compact(value.get()));
    }
    inputs.push('}');
    let inputs = RoleInputs::from_json(role, &inputs)?;

    let mut variables = BTreeMap::new();
    for (name, value) in values {
        let Some(block) = declared.get(&name) else {
            return Err(ParseRootError::UndeclaredVariable { name });
        };
        let sensitive = block.get("sensitive") == Some(&Value::Bool(true));
        let value = JsonText::parse(value.get())
            .expect("a member of valid JSON")
            .compacted();
        variables.insert(name, UserVariable { value, sensitive });
    }
    let variables = UserVariables::from_map_unchecked(variables);
    variables.check(role)?;
    Ok((inputs, variables))
}

/// The members of the values file by name, each as written (the last of a
/// repeated name counts).
fn top_level_members(text: &str) -> Result<BTreeMap<String, &RawValue>, ParseRootError> {
    let not_an_object = ParseRootError::NotAnObject { file: TFVARS_JSON };
    let raw: &RawValue = serde_json::from_str(text).map_err(|_| not_an_object.clone())?;
    match node(raw) {
        Ok(Node::Object(members)) => Ok(members.into_iter().collect()),
        _ => Err(not_an_object),
    }
}
