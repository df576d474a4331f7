//! Record-batch validation must refuse or accept any bytes without panicking,
//! and whatever it accepts must be walkable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(validated) = kafgres_wire::batch::validate_batches(data) {
        let mut pos = 0;
        for header in &validated.headers {
            let end = pos + header.total_bytes();
            assert!(end <= data.len(), "an accepted batch lies within the input");
            let _ = kafgres_wire::batch::record_timestamps(&data[pos..end]);
            pos = end;
        }
        assert_eq!(pos, data.len(), "accepted batches cover the input exactly");
    }
});
