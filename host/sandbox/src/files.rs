//! `wasi:filesystem/types` as wasmtime-wasi serves it, with every refusal
//! of the folder grants (a write under a read-only folder, a path that
//! leaves a granted folder) recorded as a denial, as refused HTTP requests
//! and capabilities are: the call then fails `denied`, and its receipt
//! counts it. A path under no granted folder at all (`/etc/passwd` when
//! only `/documents` is granted) never reaches the host: the guest's own
//! WASI library answers that nothing is there. Only regular files and
//! folders are opened: a FIFO, a socket or a device under a granted folder
//! is refused the same way, since reading one can wait forever.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult};

use crate::state::{CallState, Incidents};

/// The filesystem of one host call, and where its refusals go.
pub(crate) struct Guarded<'a> {
    inner: WasiFilesystemCtxView<'a>,
    incidents: &'a Arc<Incidents>,
    /// The path the call opens, for the denial.
    path: Option<String>,
}

struct GuardedFilesystem;

impl HasData for GuardedFilesystem {
    type Data<'a> = Guarded<'a>;
}

/// Serves `wasi:filesystem/types` through [`Guarded`], in place of
/// wasmtime-wasi's own, which `linker` already has.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = types::add_to_linker::<CallState, GuardedFilesystem>(linker, |state| Guarded {
        inner: WasiFilesystemCtxView {
            ctx: state.wasi.filesystem(),
            table: &mut state.table,
        },
        incidents: &state.gate.incidents,
        path: None,
    });
    linker.allow_shadowing(false);
    added
}

impl types::Host for Guarded<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        let code = self.inner.convert_error_code(err)?;
        if matches!(code, ErrorCode::NotPermitted) {
            let denial = match self.path.take() {
                Some(path) => format!(
                    "filesystem: opening `{path}` was refused: its folder is granted read-only, or the path leaves the granted folder"
                ),
                None => {
                    "filesystem: a change under a folder granted read-only was refused".to_owned()
                }
            };
            self.incidents.deny(denial, false);
        }
        Ok(code)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        self.inner.filesystem_error_code(err)
    }
}

/// What a file of type `kind` is, for the refusal, when it is one that is
/// never opened: anything but a regular file, a folder or a link.
fn special_file(kind: types::DescriptorType) -> Option<&'static str> {
    use types::DescriptorType as T;
    match kind {
        // wasmtime-wasi tells devices apart, and FIFOs and sockets from
        // neither (the only other kinds there are).
        T::Fifo | T::Socket | T::Unknown => Some("a FIFO or a socket"),
        T::CharacterDevice => Some("a character device"),
        T::BlockDevice => Some("a block device"),
        T::Directory | T::RegularFile | T::SymbolicLink => None,
    }
}

impl HostDescriptor for Guarded<'_> {
    async fn advise(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.inner.advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.inner.sync_data(fd).await
    }

    async fn get_flags(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorFlags> {
        self.inner.get_flags(fd).await
    }

    async fn get_type(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorType> {
        self.inner.get_type(fd).await
    }

    async fn set_size(
        &mut self,
        fd: Resource<types::Descriptor>,
        size: types::Filesize,
    ) -> FsResult<()> {
        self.inner.set_size(fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<types::Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.inner.set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<types::Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.inner.read(fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<types::Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        self.inner.write(fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        self.inner.read_directory(fd).await
    }

    async fn sync(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.inner.sync(fd).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.inner.create_directory_at(fd, path).await
    }

    async fn stat(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::DescriptorStat> {
        self.inner.stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.inner.stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.inner
            .set_times_at(fd, path_flags, path, atim, mtim)
            .await
    }

    async fn link_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.inner
            .link_at(fd, old_path_flags, old_path, new_descriptor, new_path)
            .await
    }

    async fn open_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        // Opening a FIFO waits for a writer, and reading a device or a
        // FIFO can wait forever: on the calling thread that would hold it,
        // on the blocking pool a thread for good, and at exit the process.
        // Only regular files and folders are opened (a folder's open never
        // waits, so it needs no look first).
        if !oflags.contains(types::OpenFlags::DIRECTORY)
            && let Ok(stat) = self
                .inner
                .stat_at(Resource::new_borrow(fd.rep()), path_flags, path.clone())
                .await
            && let Some(kind) = special_file(stat.type_)
        {
            self.incidents.deny(
                format!("filesystem: opening `{path}` was refused: it is {kind}, not a regular file or folder"),
                false,
            );
            return Err(ErrorCode::Access.into());
        }
        self.path = Some(path.clone());
        self.inner
            .open_at(fd, path_flags, path, oflags, flags)
            .await
    }

    fn drop(&mut self, fd: Resource<types::Descriptor>) -> wasmtime::Result<()> {
        HostDescriptor::drop(&mut self.inner, fd)
    }

    async fn readlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<String> {
        self.inner.readlink_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.inner.remove_directory_at(fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path: String,
        new_fd: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.inner.rename_at(fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.inner.symlink_at(fd, src_path, dest_path).await
    }

    async fn unlink_file_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.inner.unlink_file_at(fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        self.inner.read_via_stream(fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.inner.write_via_stream(fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.inner.append_via_stream(fd)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<types::Descriptor>,
        b: Resource<types::Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner.is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.inner.metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.inner.metadata_hash_at(fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for Guarded<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        self.inner.read_directory_entry(stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}
