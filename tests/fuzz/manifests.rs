//! Manifests: every kind read from YAML. A manifest is never trusted to be
//! well formed; reading one ends in the manifest or in an error naming the
//! file, and an accepted schedule's cadence can be asked for its ticks.

use hane_manifest::{
    AgentManifest, BudgetManifest, DeciderPolicyManifest, EvalSuiteManifest, ManifestError,
    ModelProviderManifest, OperationManifest, ScheduleManifest, WorkflowManifest,
};

use crate::engine::{Shape, Target, fuzz};

const SCHEDULE: &str = r#"apiVersion: hane.dev/v1
kind: Schedule
metadata:
  name: morning-check
spec:
  cron: "0 7 * * 1-5"
  timeZone: Asia/Tokyo
  agent: vehicle-check-scripted
  input: { vehicle: "架空 300 あ 10-02" }
  missed: runOnce
"#;

fn seeds() -> Vec<Vec<u8>> {
    let examples = hane_test_support::examples();
    let mut seeds = vec![SCHEDULE.as_bytes().to_vec()];
    for dir in [
        "agents",
        "providers",
        "policies",
        "workflows",
        "tools",
        "budgets",
        "evals",
    ] {
        let mut paths: Vec<_> = std::fs::read_dir(examples.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        paths.sort();
        seeds.extend(paths.iter().map(|p| std::fs::read(p).unwrap()));
    }
    seeds
}

/// `result`'s outcome, after checking that an error names the file.
fn outcome<T>(kind: &str, result: Result<T, ManifestError>) -> String {
    match result {
        Ok(_) => format!("{kind} ok"),
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("fuzz.yaml"),
                "{kind}: an error not naming the file: {text}"
            );
            format!("{kind}: {text}")
        }
    }
}

#[test]
fn manifests() {
    let target = Target {
        name: "manifests",
        seeds: seeds(),
        dictionary: [
            "apiVersion: hane.dev/v1\n",
            "kind: ",
            "metadata:\n  name: x\n",
            "spec:\n",
        ]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect(),
        shape: Shape::Yaml,
    };
    fuzz(target, |bytes| {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return "not UTF-8".into();
        };
        let file = "fuzz.yaml";
        let mut seen = vec![
            outcome("operation", OperationManifest::from_yaml(file, text)),
            outcome("agent", AgentManifest::from_yaml(file, text)),
            outcome("eval suite", EvalSuiteManifest::from_yaml(file, text)),
            outcome("budget", BudgetManifest::from_yaml(file, text)),
            outcome(
                "decider policy",
                DeciderPolicyManifest::from_yaml(file, text),
            ),
            outcome("provider", ModelProviderManifest::from_yaml(file, text)),
            outcome("workflow", WorkflowManifest::from_yaml(file, text)),
        ];
        match ScheduleManifest::from_yaml(file, text) {
            Ok(schedule) => {
                // An accepted schedule's cadence answers for any time.
                if let Ok(cadence) = schedule.spec.cadence() {
                    let _ = cadence.next_after(0);
                    let _ = cadence.next_after(u64::MAX / 2);
                    let _ = cadence.ticks_between(0, u64::MAX / 2, 3);
                }
                seen.push("schedule ok".into());
            }
            Err(e) => seen.push(outcome::<()>("schedule", Err(e))),
        }
        // The kind the text names decides which reader's answer is telling.
        seen.into_iter()
            .find(|o| !o.contains("kind"))
            .unwrap_or_else(|| "no kind".into())
    });
}
