//! The CLI drivers' images: `codex-baseline` built for real, once per run
//! of this binary (mmdebstrap from the host's Debian mirror, node and
//! codex from the npm registry: about two minutes), its OCI image layout
//! checked, and codex run end to end in it against the recorded
//! provider of `tests/fixtures/cli-drivers`, with no CLIs of the host
//! configured. Like `cli_drivers`, a test fails (it does not skip) when
//! what it needs is missing, saying what to install: mmdebstrap and npm
//! (`cargo xtask provision`), bubblewrap.

use std::path::PathBuf;
use std::time::Instant;

use hane_cli_drivers::{CliConfig, CliImageProfile};
use hane_container::{
    ContainerLimits, ContainerSpec, Exit, ImageDigest, ImageStore, OciLayout, PROFILE_ANNOTATION,
    RootFs,
};
use hane_coordinator::RunError;
use hane_core::RunStatus;
use tokio::io::AsyncReadExt as _;

use crate::cli_drivers::{
    FOUND, ONE_AT_A_TIME, UNKNOWN, bwrap, open_with, release_with_recording, served_with, start,
    vehicle_check,
};

/// The image built once for every test here.
struct Built {
    store: ImageStore,
    digest: ImageDigest,
}

static BUILT: tokio::sync::OnceCell<Built> = tokio::sync::OnceCell::const_new();

/// Where this process's image store is: `target/test-env/images/<pid>`.
/// A store left by an earlier run (its process gone) is removed first, so
/// runs do not pile images up.
fn store_dir() -> PathBuf {
    let parent = hane_test_support::repository().join("target/test-env/images");
    if let Ok(entries) = std::fs::read_dir(&parent) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let gone = name
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|pid| !PathBuf::from(format!("/proc/{pid}")).exists());
            if gone {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    parent.join(std::process::id().to_string())
}

async fn built() -> &'static Built {
    BUILT
        .get_or_init(|| async {
            let store = ImageStore::new(store_dir());
            let _ = std::fs::remove_dir_all(store.dir());
            let profile = CliImageProfile::named("codex-baseline").unwrap();
            let mirror = hane_container::host_debian_mirror(profile.suite).unwrap_or_else(|| {
                panic!(
                    "the host's apt has no source for Debian {} main",
                    profile.suite
                )
            });
            let recipe = profile.recipe(&mirror);
            let building = store.clone();
            let started = Instant::now();
            let image = tokio::task::spawn_blocking(move || building.build(&recipe))
                .await
                .unwrap()
                .unwrap_or_else(|e| {
                    panic!("building codex-baseline (run `cargo xtask provision`): {e}")
                });
            eprintln!(
                "codex-baseline built in {:?}: {} bytes, {}",
                started.elapsed(),
                image.layout().size(),
                image.digest()
            );
            Built {
                store,
                digest: image.digest().clone(),
            }
        })
        .await
}

/// A codex agent whose profile pins `version` in `image`.
fn pinned(name: &str, version: &str, image: &str) -> String {
    vehicle_check(
        name,
        "codex",
        &format!("  cliProfile:\n    cliVersion: {version}\n    image: {image}\n"),
    )
}

/// Images only: no CLIs of the host.
fn images_only(store: &ImageStore) -> CliConfig {
    let mut cli = CliConfig::new();
    cli.images(store.clone()).container(bwrap());
    cli
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_end_to_end_in_the_codex_baseline_image() {
    let built = built().await;
    let image = built.store.get(&built.digest).unwrap().unwrap();

    // The digest is the manifest's, in an OCI image layout whose every
    // blob is its digest.
    let layout = OciLayout::read(image.layout().dir()).unwrap();
    assert_eq!(layout.digest(), &built.digest);
    // Checked apart from the library too: coreutils' sha256sum of the
    // manifest blob is the printed digest.
    let manifest = image
        .layout()
        .dir()
        .join("blobs/sha256")
        .join(built.digest.hex());
    let sum = std::process::Command::new("sha256sum")
        .arg(&manifest)
        .output()
        .unwrap();
    let sum = String::from_utf8(sum.stdout).unwrap();
    assert_eq!(sum.split_whitespace().next(), Some(built.digest.hex()));
    layout.verify().unwrap();
    assert_eq!(
        layout
            .annotations()
            .get(PROFILE_ANNOTATION)
            .map(String::as_str),
        Some("codex-baseline")
    );
    assert_eq!(layout.manifest().layers().len(), 1);
    assert_eq!(image.profile(), Some("codex-baseline"));
    let listed = built.store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].digest(), &built.digest);

    // node 22 is on PATH inside.
    let mut container = bwrap()
        .start(ContainerSpec {
            root: RootFs::Dir(image.rootfs().to_owned()),
            mounts: Vec::new(),
            env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            cwd: "/".into(),
            command: vec!["/usr/local/bin/node".into(), "--version".into()],
            services: Vec::new(),
            limits: ContainerLimits::default(),
        })
        .await
        .unwrap();
    let mut out = String::new();
    container
        .stdout()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    assert_eq!(container.wait().await.unwrap(), Exit::Code(0));
    let profile = CliImageProfile::named("codex-baseline").unwrap();
    assert_eq!(out.trim(), format!("v{}", profile.node));

    // The agent names the image; the host has no CLIs configured.
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = pinned(
        "vehicle-check-codex",
        profile.version,
        &built.digest.to_string(),
    );
    let runtime = served_with(
        dir.path(),
        &[("codex.yaml", agent)],
        images_only(&built.store),
    )
    .await;
    let started = Instant::now();
    let run = runtime
        .run_to_end(start("vehicle-check-codex", FOUND))
        .await
        .unwrap();
    let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?}\n{:#?}\n{}",
        run.error,
        output.events,
        output.stderr_tail
    );
    eprintln!("codex in its image, found: {:?}", started.elapsed());
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "found");
    assert_eq!(result["model"], "Toyota Hiace Van");
    let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["data.find_record", "submit_result"]);
    assert_eq!(output.driver, "codex");
    assert_eq!(output.version, "0.171.0");

    let run = runtime
        .run_to_end(start("vehicle-check-codex", UNKNOWN))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "handed_over");
    let tasks = runtime.tasks(&run.id).await.unwrap().items;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].assignment, "fleet-desk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_pinning_another_version_than_its_image_has_is_refused_at_start() {
    let built = built().await;
    let dir = tempfile::tempdir().unwrap();
    let digest = built.digest.to_string();
    let runtime = served_with(
        dir.path(),
        &[(
            "pinned.yaml",
            pinned("vehicle-check-pinned", "0.170.0", &digest),
        )],
        images_only(&built.store),
    )
    .await;
    let err = runtime
        .start(start("vehicle-check-pinned", FOUND))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::DriverUnavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "its cliProfile pins @openai/codex 0.170.0 but image {digest} has @openai/codex 0.171.0"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_release_naming_an_image_that_is_not_built_fails_activation_saying_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::new(dir.path().join("images"));
    let missing = format!("sha256:{}", "ab".repeat(32));
    let release = release_with_recording(
        dir.path(),
        &[
            (
                "pinned.yaml",
                pinned("vehicle-check-pinned", "0.171.0", &missing),
            ),
            (
                "claude.yaml",
                vehicle_check(
                    "vehicle-check-claude",
                    "claude",
                    &format!("  cliProfile:\n    cliVersion: 2.1.197\n    image: {missing}\n"),
                ),
            ),
        ],
    );
    let runtime = open_with(dir.path(), images_only(&store));
    let err = runtime.activate(&release).await.unwrap_err();
    let text = err.to_string();
    let store_dir = store.dir().display();
    for (file, profile) in [
        ("pinned.yaml", "codex-baseline"),
        ("claude.yaml", "claude-baseline"),
    ] {
        assert!(
            text.contains(&format!(
                "{file}: spec.cliProfile.image: image {missing} is not built in {store_dir}: run `hane image build {profile}`"
            )),
            "{text}"
        );
    }
    assert!(matches!(runtime.release().await, Err(RunError::NoRelease)));
    // Nothing was made in the store by looking.
    assert!(!store.dir().exists());
}
