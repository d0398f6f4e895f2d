//! Printing a server-side `meta.k8s.io/v1` Table the way `kubectl get` does:
//! the apiserver evaluates the printer columns, so what is shown here is
//! exactly what a person running `kubectl get` sees.

use serde_json::Value;

/// The `Accept` header that asks the apiserver for a Table instead of a list.
pub const ACCEPT_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// kubectl's tabwriter settings: a column is at least 6 wide, and 3 spaces
/// separate one column from the next.
const MIN_WIDTH: usize = 6;
const PADDING: usize = 3;

/// One cell as kubectl prints it: strings up to their first line break
/// (then `...`), numbers and booleans as Go prints them, nothing for null.
fn cell_text(cell: &Value) -> String {
    match cell {
        Value::Null => String::new(),
        Value::String(s) => match s.find(['\n', '\r', '\x0c']) {
            Some(i) => format!("{}...", &s[..i]),
            None => s.clone(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// Renders `table` (the apiserver's JSON). `wide` adds the columns of
/// priority above 0, as `-o wide` does. An empty table reads as kubectl's
/// "No resources found" line.
pub fn render(table: &Value, namespace: &str, wide: bool) -> Result<String, String> {
    if table.get("kind").and_then(Value::as_str) != Some("Table") {
        return Err("the apiserver did not answer with a meta.k8s.io Table".to_owned());
    }
    let columns = table
        .get("columnDefinitions")
        .and_then(Value::as_array)
        .ok_or("the Table has no columnDefinitions")?;
    let rows = table
        .get("rows")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if rows.is_empty() {
        return Ok(format!("No resources found in {namespace} namespace.\n"));
    }
    let shown: Vec<usize> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| wide || c.get("priority").and_then(Value::as_i64).unwrap_or(0) == 0)
        .map(|(i, _)| i)
        .collect();
    let mut lines: Vec<Vec<String>> = vec![
        shown
            .iter()
            .map(|&i| {
                columns[i]
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_uppercase()
            })
            .collect(),
    ];
    for row in rows {
        let cells = row
            .get("cells")
            .and_then(Value::as_array)
            .ok_or("a Table row has no cells")?;
        lines.push(
            shown
                .iter()
                .map(|&i| cells.get(i).map(cell_text).unwrap_or_default())
                .collect(),
        );
    }
    Ok(align(&lines))
}

/// Left-aligns cells into columns; the last column is not padded.
fn align(lines: &[Vec<String>]) -> String {
    let count = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..count)
        .map(|c| {
            let longest = lines
                .iter()
                .map(|l| l.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0);
            (longest + PADDING).max(MIN_WIDTH)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        for (c, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if c + 1 < line.len() {
                let pad = widths[c] - cell.chars().count();
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool_table(rows: Value) -> Value {
        json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "columnDefinitions": [
                {"name": "Name", "type": "string", "priority": 0},
                {"name": "Cluster", "type": "string", "priority": 0},
                {"name": "Replicas", "type": "integer", "priority": 0},
                {"name": "Ready", "type": "string", "priority": 0},
                {"name": "InputsApplied", "type": "string", "priority": 1},
                {"name": "Age", "type": "date", "priority": 0},
            ],
            "rows": rows,
        })
    }

    #[test]
    fn columns_align_like_kubectl_and_wide_adds_priority_columns() {
        let table = pool_table(json!([
            {"cells": ["demo-workers", "demo", 3, "True", "True", "41s"]},
            {"cells": ["b", null, null, "Unknown", null, "2m"]},
        ]));
        assert_eq!(
            render(&table, "ns", false).unwrap(),
            "NAME           CLUSTER   REPLICAS   READY     AGE\n\
             demo-workers   demo      3          True      41s\n\
             b                                   Unknown   2m\n"
        );
        assert_eq!(
            render(&table, "ns", true).unwrap(),
            "NAME           CLUSTER   REPLICAS   READY     INPUTSAPPLIED   AGE\n\
             demo-workers   demo      3          True      True            41s\n\
             b                                   Unknown                   2m\n"
        );
    }

    #[test]
    fn narrow_columns_take_the_minimum_width() {
        let table = json!({
            "kind": "Table",
            "columnDefinitions": [
                {"name": "A", "type": "string"},
                {"name": "Ok", "type": "boolean"},
                {"name": "Z", "type": "string"},
            ],
            "rows": [{"cells": ["x", true, "multi\nline"]}],
        });
        assert_eq!(
            render(&table, "ns", false).unwrap(),
            "A     OK     Z\nx     true   multi...\n"
        );
    }

    #[test]
    fn empty_and_malformed_tables() {
        assert_eq!(
            render(&pool_table(json!([])), "captf-demo", false).unwrap(),
            "No resources found in captf-demo namespace.\n"
        );
        assert!(render(&json!({"kind": "List", "items": []}), "ns", false).is_err());
        assert!(render(&json!({"kind": "Table", "rows": []}), "ns", false).is_err());
    }
}
