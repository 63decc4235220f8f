use std::fs;

use image::{GrayImage, Rgb, RgbImage, Rgba, RgbaImage};
use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;

fn input(path: &str) -> ViewInput {
    ViewInput {
        path: path.to_owned(),
        max_dimension: None,
        max_bytes: None,
    }
}

/// A deterministic image that PNG cannot compress much.
fn noise(width: u32, height: u32) -> RgbImage {
    let mut state = 0x2545_f491_u32;
    RgbImage::from_fn(width, height, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let [r, g, b, _] = state.to_le_bytes();
        Rgb([r, g, b])
    })
}

fn decode_thumbnail(thumbnail: &Thumbnail) -> DynamicImage {
    let png = BASE64.decode(&thumbnail.data_base64).unwrap();
    assert_eq!(png.len(), thumbnail.bytes as usize);
    assert_eq!(sniff(&png), Some(ImageFormat::Png));
    image::load_from_memory_with_format(&png, ImageFormat::Png).unwrap()
}

#[test]
fn sniffs_every_supported_format_from_content() {
    let dir = TempDir::new().unwrap();
    let image = noise(40, 30);
    let formats = [
        (ImageFormat::Png, "image/png"),
        (ImageFormat::Jpeg, "image/jpeg"),
        (ImageFormat::Gif, "image/gif"),
        (ImageFormat::WebP, "image/webp"),
        (ImageFormat::Bmp, "image/bmp"),
    ];
    for (format, media_type) in formats {
        // The name says nothing: the format comes from the bytes.
        let name = format!("picture-{media_type}.bin").replace('/', "-");
        let mut bytes = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut bytes), format)
            .unwrap();
        fs::write(dir.path().join(&name), &bytes).unwrap();
        let out = view(&[dir.path()], input(&name)).unwrap();
        assert_eq!(out.media_type, media_type);
        assert_eq!((out.width, out.height), (40, 30));
        assert_eq!(out.file_bytes, bytes.len() as u64);
        assert_eq!((out.thumbnail.width, out.thumbnail.height), (40, 30));
        assert_eq!(out.thumbnail.media_type, "image/png");
        let thumb = decode_thumbnail(&out.thumbnail);
        assert_eq!((thumb.width(), thumb.height()), (40, 30));
    }
}

#[test]
fn thumbnails_keep_the_aspect_ratio_and_fit_max_dimension() {
    let dir = TempDir::new().unwrap();
    RgbImage::from_pixel(900, 300, Rgb([200, 10, 10]))
        .save(dir.path().join("wide.png"))
        .unwrap();
    GrayImage::new(100, 1000)
        .save(dir.path().join("tall.png"))
        .unwrap();

    let out = view(&[dir.path()], input("wide.png")).unwrap();
    assert_eq!((out.thumbnail.width, out.thumbnail.height), (512, 171));
    let thumb = decode_thumbnail(&out.thumbnail);
    assert_eq!(*thumb.to_rgb8().get_pixel(10, 10), Rgb([200, 10, 10]));

    let mut small = input("tall.png");
    small.max_dimension = Some(16);
    let out = view(&[dir.path()], small).unwrap();
    assert_eq!((out.thumbnail.width, out.thumbnail.height), (2, 16));
    // Grayscale stays grayscale.
    assert_eq!(decode_thumbnail(&out.thumbnail).color(), ColorType::L8);
}

#[test]
fn shrinks_until_the_png_fits_max_bytes() {
    let dir = TempDir::new().unwrap();
    noise(400, 200).save(dir.path().join("noise.png")).unwrap();
    let mut i = input("noise.png");
    i.max_bytes = Some(20_000);
    let out = view(&[dir.path()], i).unwrap();
    assert!(out.thumbnail.bytes <= 20_000, "{}", out.thumbnail.bytes);
    assert!(out.thumbnail.width < 400);
    // Shrinking keeps the aspect ratio, give or take rounding.
    let ratio = f64::from(out.thumbnail.width) / f64::from(out.thumbnail.height);
    assert!((ratio - 2.0).abs() < 0.1, "{ratio}");
    decode_thumbnail(&out.thumbnail);
}

#[test]
fn transparency_is_kept_and_opaque_alpha_dropped() {
    let dir = TempDir::new().unwrap();
    RgbaImage::from_pixel(8, 8, Rgba([1, 2, 3, 128]))
        .save(dir.path().join("clear.png"))
        .unwrap();
    RgbaImage::from_pixel(8, 8, Rgba([1, 2, 3, 255]))
        .save(dir.path().join("opaque.png"))
        .unwrap();
    let clear = view(&[dir.path()], input("clear.png")).unwrap();
    assert_eq!(decode_thumbnail(&clear.thumbnail).color(), ColorType::Rgba8);
    let opaque = view(&[dir.path()], input("opaque.png")).unwrap();
    assert_eq!(decode_thumbnail(&opaque.thumbnail).color(), ColorType::Rgb8);
}

#[test]
fn refuses_images_over_the_pixel_cap_from_the_header() {
    // A BMP header claiming 20000x20000 pixels, with no pixel data at all:
    // the cap must trip before anything is decoded.
    let mut bmp = Vec::new();
    bmp.extend_from_slice(b"BM");
    bmp.extend_from_slice(&54u32.to_le_bytes()); // file size
    bmp.extend_from_slice(&[0; 4]); // reserved
    bmp.extend_from_slice(&54u32.to_le_bytes()); // pixel data offset
    bmp.extend_from_slice(&40u32.to_le_bytes()); // BITMAPINFOHEADER size
    bmp.extend_from_slice(&20_000i32.to_le_bytes());
    bmp.extend_from_slice(&20_000i32.to_le_bytes());
    bmp.extend_from_slice(&1u16.to_le_bytes()); // planes
    bmp.extend_from_slice(&24u16.to_le_bytes()); // bits per pixel
    bmp.extend_from_slice(&[0; 24]); // no compression, sizes, resolution, palette
    let dir = TempDir::new().unwrap();
    fs::write(dir.path().join("huge.bmp"), &bmp).unwrap();
    let err = view(&[dir.path()], input("huge.bmp")).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidInput(
            "huge.bmp is 20000x20000 pixels; images over 100000000 pixels cannot be viewed".into()
        )
    );
}

#[test]
fn refuses_files_over_the_byte_cap_without_reading_them() {
    let dir = TempDir::new().unwrap();
    let file = fs::File::create(dir.path().join("big.png")).unwrap();
    // Sparse: costs no disk and is never read.
    file.set_len(MAX_FILE_BYTES + 1).unwrap();
    let err = view(&[dir.path()], input("big.png")).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("33554433 bytes")),
        "{err:?}"
    );
}

#[test]
fn refuses_what_is_not_a_supported_image() {
    let dir = TempDir::new().unwrap();
    fs::write(dir.path().join("fake.png"), "just text").unwrap();
    let err = view(&[dir.path()], input("fake.png")).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("not a PNG")),
        "{err:?}"
    );

    // Right magic, broken body.
    fs::write(dir.path().join("broken.png"), b"\x89PNG\r\n\x1a\n garbage").unwrap();
    let err = view(&[dir.path()], input("broken.png")).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("could not be decoded")),
        "{err:?}"
    );

    fs::create_dir(dir.path().join("dir")).unwrap();
    assert!(matches!(
        view(&[dir.path()], input("dir")),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        view(&[dir.path()], input("missing.png")),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        view(&[dir.path()], input("/etc/hosts")),
        Err(Error::Denied(_))
    ));
}

#[test]
fn bounds_are_validated() {
    let dir = TempDir::new().unwrap();
    let cases = [
        (
            Some(15),
            None,
            "max_dimension must be between 16 and 2048, not 15",
        ),
        (
            Some(2049),
            None,
            "max_dimension must be between 16 and 2048, not 2049",
        ),
        (
            None,
            Some(1023),
            "max_bytes must be between 1024 and 1048576, not 1023",
        ),
        (
            None,
            Some(MAX_MAX_BYTES + 1),
            "max_bytes must be between 1024 and 1048576, not 1048577",
        ),
    ];
    for (max_dimension, max_bytes, message) in cases {
        let err = view(
            &[dir.path()],
            ViewInput {
                path: "x.png".into(),
                max_dimension,
                max_bytes,
            },
        )
        .unwrap_err();
        assert_eq!(err, Error::InvalidInput(message.into()));
    }
}

#[test]
fn fit_never_enlarges_and_keeps_at_least_one_pixel() {
    assert_eq!(fit(10, 5, 512), (10, 5));
    assert_eq!(fit(1024, 512, 512), (512, 256));
    assert_eq!(fit(512, 1024, 100), (50, 100));
    assert_eq!(fit(10_000, 1, 16), (16, 1));
}

#[test]
fn json_shapes_match_the_schemas() {
    let dir = TempDir::new().unwrap();
    RgbImage::new(4, 2).save(dir.path().join("a.png")).unwrap();
    let out = view(&[dir.path()], input("a.png")).unwrap();
    let value = serde_json::to_value(&out).unwrap();
    assert_eq!(
        value,
        json!({
            "path": dir.path().join("a.png").display().to_string(),
            "media_type": "image/png",
            "width": 4,
            "height": 2,
            "file_bytes": out.file_bytes,
            "thumbnail": {
                "media_type": "image/png",
                "width": 4,
                "height": 2,
                "bytes": out.thumbnail.bytes,
                "data_base64": out.thumbnail.data_base64,
            },
        })
    );

    let d = hane_guest::__private::describe(run, "image.view", "0", "", hane_guest::Impact::Read);
    let schema: Value = serde_json::from_str(&d.input_schema).unwrap();
    assert_eq!(schema["required"], json!(["path"]));
    assert_eq!(schema["properties"]["max_dimension"]["minimum"], 16);
    assert_eq!(schema["properties"]["max_bytes"]["maximum"], 1_048_576);
    let schema: Value = serde_json::from_str(&d.output_schema).unwrap();
    assert_eq!(
        schema["required"],
        json!([
            "path",
            "media_type",
            "width",
            "height",
            "file_bytes",
            "thumbnail"
        ])
    );
}
