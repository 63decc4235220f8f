//! [`OciLayout`]: one image as an OCI image layout on disk, its single
//! layer written from a root filesystem and every blob read back against
//! its digest.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, DescriptorBuilder, ImageConfiguration,
    ImageConfigurationBuilder, ImageIndex, ImageIndexBuilder, ImageManifest, ImageManifestBuilder,
    MediaType, OciLayoutBuilder, Os, RootFsBuilder, Sha256Digest,
};
use sha2::{Digest as _, Sha256};

use super::{ImageDigest, ImageError, LAYOUT_VERSION, MAX_METADATA_BYTES, io};

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

pub(super) fn layout_error(path: &Path, message: String) -> ImageError {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::super::PROFILE_ANNOTATION;
    use super::*;

    /// A small tree: a file, an executable, a directory, a symlink.
    pub(crate) fn small_root() -> tempfile::TempDir {
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
}
