//! `hane image build | list`: the root-filesystem images the CLI drivers
//! run in, built from a baseline profile and stored by digest beside the
//! store (`images/` in the store's directory, or `$HANE_IMAGES`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use hane_cli_drivers::{BASELINE_PROFILES, CliImageProfile};
use hane_container::{ImageStore, StoredImage};
use serde_json::json;

use crate::context::StoreArg;
use crate::context::UsageError;
use crate::context::finish;
use crate::runtime::store_for;
use crate::terminal::terminal_json;

#[derive(Args)]
pub struct ImageArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The image store's directory [default: $HANE_IMAGES, else `images`
    /// beside the store's file].
    #[arg(long, global = true, value_name = "DIR")]
    images: Option<PathBuf>,
    #[command(subcommand)]
    command: ImageCommand,
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Build PROFILE's image (Debian's minbase from the host's apt mirror
    /// with mmdebstrap, then node and the CLI from the npm registry),
    /// store it as an OCI image layout and print its digest, the value
    /// for an agent's spec.cliProfile.image. An image already stored
    /// under the same digest is kept as it is.
    Build {
        /// codex-baseline, claude-baseline or opencode-baseline.
        profile: String,
        /// The Debian mirror [default: the one the host's apt uses for
        /// the profile's suite, from /etc/apt/sources.list*].
        #[arg(long, value_name = "URL")]
        mirror: Option<String>,
    },
    /// List the stored images: digest, profile, size.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn main(args: ImageArgs) -> ExitCode {
    finish(run(args).map(|()| ExitCode::SUCCESS))
}

fn run(args: ImageArgs) -> anyhow::Result<()> {
    let store = match args.images {
        Some(dir) => ImageStore::new(dir),
        None => store_for(&args.store.path()?),
    };
    match args.command {
        ImageCommand::Build { profile, mirror } => build(&store, &profile, mirror),
        ImageCommand::List { json } => list(&store, json),
    }
}

fn build(store: &ImageStore, name: &str, mirror: Option<String>) -> anyhow::Result<()> {
    let Some(profile) = CliImageProfile::named(name) else {
        let names: Vec<&str> = BASELINE_PROFILES.iter().map(|p| p.name).collect();
        return Err(UsageError(format!(
            "no profile is named `{name}`: the profiles are {}",
            names.join(", ")
        ))
        .into());
    };
    let mirror = match mirror {
        Some(mirror) => mirror,
        None => hane_container::host_debian_mirror(profile.suite).ok_or_else(|| {
            UsageError(format!(
                "the host's apt has no source for Debian {} main in /etc/apt/sources.list or /etc/apt/sources.list.d: pass --mirror URL",
                profile.suite
            ))
        })?,
    };
    eprintln!(
        "building {} ({} {}, node {}, Debian {} from {}) in {}; this takes a few minutes",
        profile.name,
        profile.package,
        profile.version,
        profile.node,
        profile.suite,
        mirror,
        store.dir().display()
    );
    let started = Instant::now();
    let working = crate::terminal::Working::start(&format!("building {}", profile.name));
    let image = store.build(&profile.recipe(&mirror));
    drop(working);
    let image = image.with_context(|| format!("building image {}", profile.name))?;
    eprintln!(
        "built {} in {:.0?}: {} in {}",
        profile.name,
        started.elapsed(),
        size(image.layout().size()),
        store.dir().display()
    );
    println!("{}", image.digest());
    eprintln!(
        "name it in an agent: spec.cliProfile {{ cliVersion: {}, image: {} }}",
        profile.version,
        image.digest()
    );
    Ok(())
}

fn list(store: &ImageStore, json: bool) -> anyhow::Result<()> {
    let images: Vec<StoredImage> = store
        .list()
        .with_context(|| format!("listing the images in {}", store.dir().display()))?;
    if json {
        let list: Vec<_> = images
            .iter()
            .map(|i| {
                json!({
                    "digest": i.digest().to_string(),
                    "profile": i.profile(),
                    "sizeBytes": i.layout().size(),
                    "rootfs": i.rootfs(),
                })
            })
            .collect();
        println!("{}", terminal_json(&list)?);
    } else if images.is_empty() {
        eprintln!(
            "no images in {}: build one with `hane image build PROFILE`",
            store.dir().display()
        );
    } else {
        let width = images
            .iter()
            .filter_map(StoredImage::profile)
            .map(str::len)
            .max()
            .unwrap_or(0)
            .max(7);
        println!("{:71}  {:width$}  SIZE", "DIGEST", "PROFILE");
        for image in &images {
            println!(
                "{:71}  {:width$}  {}",
                image.digest().to_string(),
                image.profile().unwrap_or("-"),
                size(image.layout().size())
            );
        }
    }
    Ok(())
}

fn size(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}
