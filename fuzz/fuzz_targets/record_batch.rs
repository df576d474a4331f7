//! Record-batch validation must refuse or accept any bytes without panicking,
//! and whatever it accepts must be walkable. The produce path's validation
//! also decompresses, under a cap: no input may make it allocate past that.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Small, so a decompression bomb is refused quickly (and an allocation past
/// the cap would show in libFuzzer's RSS limit).
const DECOMPRESSED_BYTES_MAX: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let limit = kafgres_record::compression::DecompressLimit { bytes_max: DECOMPRESSED_BYTES_MAX };
    let _ = kafgres_record::validate_produced_batches(data, limit);
    // Random bytes almost never carry a valid length and CRC, so the paths
    // behind those checks (decompression, the record walk) would go unexplored:
    // also try the input as one batch whose length and CRC are made right.
    if data.len() >= kafgres_record::BATCH_HEADER_BYTES {
        let mut fixed = data.to_vec();
        let length = (fixed.len() - kafgres_record::BATCH_LOG_OVERHEAD_BYTES) as i32;
        fixed[8..12].copy_from_slice(&length.to_be_bytes());
        fixed[16] = kafgres_record::MAGIC_V2 as u8;
        kafgres_record::rewrite_crc(&mut fixed);
        let _ = kafgres_record::validate_produced_batches(&fixed, limit);
    }
    if let Ok(validated) = kafgres_record::validate_batches(data) {
        let mut pos = 0;
        for header in &validated.headers {
            let end = pos + header.total_bytes();
            assert!(end <= data.len(), "an accepted batch lies within the input");
            let _ = kafgres_record::record_timestamps(&data[pos..end]);
            pos = end;
        }
        assert_eq!(pos, data.len(), "accepted batches cover the input exactly");
    }
});
