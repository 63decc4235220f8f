//! `image.view`: looks at an image in the granted directories.
//!
//! Reports the image's format (from its content, not its name) and size, and
//! returns a PNG thumbnail as base64 that a model with vision can look at:
//! scaled down, keeping the aspect ratio, to fit `max_dimension`, and scaled
//! down further until the PNG fits `max_bytes`.
//!
//! Decoding is the expensive part, so the file size ([`MAX_FILE_BYTES`]) and
//! the pixel count from the header ([`MAX_PIXELS`]) are checked before any
//! pixel is decoded.
//!
//! The logic is [`view`], which takes its roots explicitly; the exported
//! operation passes the guest paths of the host's grants.
//!
//! # Examples
//!
//! ```
//! use image_view::{view, ViewInput};
//!
//! let dir = tempfile::tempdir()?;
//! image::RgbImage::new(800, 400).save(dir.path().join("wide.png"))?;
//!
//! let input = ViewInput { path: "wide.png".into(), max_dimension: Some(100), max_bytes: None };
//! let output = view(&[dir.path()], input)?;
//! assert_eq!(output.media_type, "image/png");
//! assert_eq!((output.width, output.height), (800, 400));
//! assert_eq!((output.thumbnail.width, output.thumbnail.height), (100, 50));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs;
use std::io::Cursor;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hane_guest::Error;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ColorType, DynamicImage, ImageError, ImageFormat, ImageReader, Limits};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest thumbnail side when the input gives no `max_dimension`.
pub const DEFAULT_MAX_DIMENSION: u32 = 512;
/// Smallest `max_dimension` accepted.
pub const MIN_MAX_DIMENSION: u32 = 16;
/// Largest `max_dimension` accepted.
pub const MAX_MAX_DIMENSION: u32 = 2048;
/// Thumbnail PNG bytes when the input gives no `max_bytes`: 256 KiB.
pub const DEFAULT_MAX_BYTES: u32 = 256 * 1024;
/// Smallest `max_bytes` accepted: below this even a tiny PNG hardly fits.
pub const MIN_MAX_BYTES: u32 = 1024;
/// Largest `max_bytes` accepted: 1 MiB.
pub const MAX_MAX_BYTES: u32 = 1024 * 1024;
/// Largest file looked at: 32 MiB.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Most pixels an image may have (100 megapixels), checked from its header.
pub const MAX_PIXELS: u64 = 100_000_000;
/// Memory the decoder may allocate: 512 MiB, enough for 100 megapixels of
/// 8-bit RGBA.
const MAX_DECODE_ALLOC: u64 = 512 * 1024 * 1024;
/// Each retry shrinks the thumbnail's sides to at most this fraction.
const SHRINK: f64 = 0.9;

/// Look at a PNG, JPEG, GIF, WebP or BMP image in the granted directories:
/// its format, its size and a PNG thumbnail.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewInput {
    /// Guest path of the image: absolute inside a granted directory, or
    /// relative to the first one.
    pub path: String,
    /// Longest side of the thumbnail in pixels, 16 to 2048; default 512.
    /// Images are never enlarged.
    #[serde(default)]
    #[schemars(range(min = 16, max = 2048))]
    pub max_dimension: Option<u32>,
    /// Largest thumbnail PNG in bytes, 1024 to 1048576; default 262144. The
    /// thumbnail is shrunk further until it fits.
    #[serde(default)]
    #[schemars(range(min = 1024, max = 1_048_576))]
    pub max_bytes: Option<u32>,
}

/// The image and its thumbnail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ViewOutput {
    /// Guest path of the image.
    pub path: String,
    /// Format found from the content: image/png, image/jpeg, image/gif,
    /// image/webp or image/bmp.
    pub media_type: String,
    /// Width of the image in pixels.
    pub width: u32,
    /// Height of the image in pixels.
    pub height: u32,
    /// Size of the file in bytes.
    pub file_bytes: u64,
    /// The scaled-down copy.
    pub thumbnail: Thumbnail,
}

/// A PNG copy of the image, scaled to fit the requested bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Thumbnail {
    /// Always image/png.
    pub media_type: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Size of the PNG in bytes.
    pub bytes: u32,
    /// The PNG, base64-encoded (standard alphabet, padded).
    pub data_base64: String,
}

fn run(input: ViewInput) -> Result<ViewOutput, Error> {
    view(&hane_guest::fs::grant_paths(), input)
}

hane_guest::operation! {
    name: "image.view",
    impact: Read,
    run: run,
}

/// Looks at the image `input.path`, which must lie inside one of `roots`.
///
/// # Errors
///
/// - [`Error::InvalidInput`] for bounds out of range, a directory, a file
///   over [`MAX_FILE_BYTES`], content that is not a supported image, an image
///   over [`MAX_PIXELS`], or one that does not decode;
/// - [`Error::Denied`] when the path lies outside `roots`;
/// - [`Error::NotFound`] when the file does not exist;
/// - [`Error::Failed`] when no thumbnail fits `max_bytes`.
pub fn view(roots: &[impl AsRef<Path>], input: ViewInput) -> Result<ViewOutput, Error> {
    let max_dimension = bounded(
        "max_dimension",
        input.max_dimension,
        DEFAULT_MAX_DIMENSION,
        MIN_MAX_DIMENSION,
        MAX_MAX_DIMENSION,
    )?;
    let max_bytes = bounded(
        "max_bytes",
        input.max_bytes,
        DEFAULT_MAX_BYTES,
        MIN_MAX_BYTES,
        MAX_MAX_BYTES,
    )?;
    let name = input.path.as_str();
    let path = hane_guest::fs::resolve(roots, name)?;
    let meta = fs::metadata(&path).map_err(|e| Error::from_io(&e, name))?;
    if meta.is_dir() {
        return Err(Error::InvalidInput(format!(
            "{name} is a directory, not an image"
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(Error::InvalidInput(format!(
            "{name} is {} bytes; images over {MAX_FILE_BYTES} bytes cannot be viewed",
            meta.len()
        )));
    }
    let bytes = fs::read(&path).map_err(|e| Error::from_io(&e, name))?;

    let format = sniff(&bytes).ok_or_else(|| {
        Error::InvalidInput(format!("{name} is not a PNG, JPEG, GIF, WebP or BMP image"))
    })?;
    let (width, height) = reader(&bytes, format)
        .into_dimensions()
        .map_err(|e| undecodable(name, &e))?;
    let pixels = u64::from(width) * u64::from(height);
    if pixels > MAX_PIXELS {
        return Err(Error::InvalidInput(format!(
            "{name} is {width}x{height} pixels; images over {MAX_PIXELS} pixels cannot be viewed"
        )));
    }
    let image = reader(&bytes, format)
        .decode()
        .map_err(|e| undecodable(name, &e))?;
    drop(bytes);
    let thumbnail = thumbnail(image, max_dimension, max_bytes as usize)
        .map_err(|why| Error::Failed(format!("{name}: {why}")))?;

    Ok(ViewOutput {
        path: path.display().to_string(),
        media_type: format.to_mime_type().to_owned(),
        width,
        height,
        file_bytes: meta.len(),
        thumbnail,
    })
}

fn bounded(name: &str, value: Option<u32>, default: u32, min: u32, max: u32) -> Result<u32, Error> {
    let value = value.unwrap_or(default);
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(Error::InvalidInput(format!(
            "{name} must be between {min} and {max}, not {value}"
        )))
    }
}

/// The format of `bytes` from their magic numbers, if it is one this
/// operation decodes.
fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    let format = image::guess_format(bytes).ok()?;
    matches!(
        format,
        ImageFormat::Png
            | ImageFormat::Jpeg
            | ImageFormat::Gif
            | ImageFormat::WebP
            | ImageFormat::Bmp
    )
    .then_some(format)
}

fn reader(bytes: &[u8], format: ImageFormat) -> ImageReader<Cursor<&[u8]>> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    reader.limits(limits);
    reader
}

fn undecodable(name: &str, err: &ImageError) -> Error {
    Error::InvalidInput(format!("{name} could not be decoded: {err}"))
}

/// The largest size within `max_dimension` with the aspect ratio of
/// `width`x`height`, never larger than the image.
fn fit(width: u32, height: u32, max_dimension: u32) -> (u32, u32) {
    let longest = width.max(height);
    if longest <= max_dimension {
        return (width, height);
    }
    let scale = f64::from(max_dimension) / f64::from(longest);
    (scaled(width, scale), scaled(height, scale))
}

fn scaled(side: u32, scale: f64) -> u32 {
    // The product is at most `side`, so the cast cannot overflow.
    ((f64::from(side) * scale).round() as u32).max(1)
}

fn thumbnail(
    image: DynamicImage,
    max_dimension: u32,
    max_bytes: usize,
) -> Result<Thumbnail, String> {
    let (width, height) = fit(image.width(), image.height(), max_dimension);
    // Later sizes are scaled from this first one, not from the original,
    // which may be a hundred times larger.
    let base = compact(image.thumbnail_exact(width, height));
    drop(image);
    let (mut width, mut height) = (width, height);
    loop {
        let candidate = if (width, height) == (base.width(), base.height()) {
            encode_png(&base)?
        } else {
            encode_png(&base.thumbnail_exact(width, height))?
        };
        if candidate.len() <= max_bytes {
            return Ok(Thumbnail {
                media_type: "image/png".to_owned(),
                width,
                height,
                bytes: u32::try_from(candidate.len()).map_err(|e| e.to_string())?,
                data_base64: BASE64.encode(&candidate),
            });
        }
        if width == 1 && height == 1 {
            return Err(format!("no thumbnail fits in {max_bytes} bytes"));
        }
        // PNG size grows roughly with the pixel count, so scale each side by
        // the square root of the overshoot, and always by at least SHRINK.
        let ratio = (max_bytes as f64 / candidate.len() as f64)
            .sqrt()
            .min(SHRINK);
        (width, height) = (scaled(width, ratio), scaled(height, ratio));
    }
}

/// The image in the smallest 8-bit color type that keeps what it shows:
/// grayscale stays grayscale, and an alpha channel that is fully opaque is
/// dropped.
fn compact(image: DynamicImage) -> DynamicImage {
    let color = image.color();
    let gray = matches!(
        color,
        ColorType::L8 | ColorType::L16 | ColorType::La8 | ColorType::La16
    );
    let opaque = !color.has_alpha() || image.to_rgba8().pixels().all(|p| p.0[3] == u8::MAX);
    match (gray, opaque) {
        (true, true) => DynamicImage::ImageLuma8(image.to_luma8()),
        (true, false) => DynamicImage::ImageLumaA8(image.to_luma_alpha8()),
        (false, true) => DynamicImage::ImageRgb8(image.to_rgb8()),
        (false, false) => DynamicImage::ImageRgba8(image.to_rgba8()),
    }
}

fn encode_png(image: &DynamicImage) -> Result<Vec<u8>, String> {
    let mut png = Vec::new();
    let encoder =
        PngEncoder::new_with_quality(&mut png, CompressionType::Best, FilterType::Adaptive);
    image
        .write_with_encoder(encoder)
        .map_err(|e| format!("encoding the thumbnail: {e}"))?;
    Ok(png)
}

#[cfg(test)]
mod tests;
