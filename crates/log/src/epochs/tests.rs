use super::*;
use crate::storage::memory::{CrashMode, MemStorage};

fn history(entries: &[(i32, i64)]) -> LeaderEpochHistory {
    let entries = entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect();
    LeaderEpochHistory::from_entries(entries).expect("increasing entries")
}

#[test]
fn end_offset_for_epoch_follows_kafka_in_every_branch() {
    // Epochs 2, 5, 6 started at 10, 40, 70; the log ends at 100.
    let h = history(&[(2, 10), (5, 40), (6, 70)]);
    let end = 100;
    assert_eq!(h.end_offset_for_epoch(6, end), (6, 100), "the latest epoch ends at the log end");
    assert_eq!(h.end_offset_for_epoch(7, end), (-1, -1), "later than every epoch: unknown");
    assert_eq!(h.end_offset_for_epoch(-1, end), (-1, -1), "undefined epoch");
    assert_eq!(h.end_offset_for_epoch(5, end), (5, 70), "a known epoch ends where the next starts");
    assert_eq!(h.end_offset_for_epoch(2, end), (2, 40));
    assert_eq!(h.end_offset_for_epoch(3, end), (2, 40), "an unknown epoch between: the largest below it");
    assert_eq!(h.end_offset_for_epoch(4, end), (2, 40));
    assert_eq!(h.end_offset_for_epoch(1, end), (1, 10), "below the first entry: itself, ending at its start");
    assert_eq!(h.end_offset_for_epoch(0, end), (0, 10));
    assert_eq!(h.end_offset_for_epoch(-5, end), (-5, 10), "below -1 is not undefined");
    let empty = LeaderEpochHistory::default();
    assert_eq!(empty.end_offset_for_epoch(0, 0), (-1, -1));
    assert_eq!(empty.end_offset_for_epoch(-1, 0), (-1, -1));
    let single = history(&[(0, 0)]);
    assert_eq!(single.end_offset_for_epoch(0, 12), (0, 12));
    assert_eq!(single.end_offset_for_epoch(1, 12), (-1, -1));
}

#[test]
fn epoch_of_and_latest() {
    let h = history(&[(2, 10), (5, 40)]);
    assert_eq!(h.latest_epoch(), Some(5));
    assert_eq!(h.latest(), Some(EpochEntry { epoch: 5, start_offset: 40 }));
    assert_eq!(
        (h.epoch_of(9), h.epoch_of(10), h.epoch_of(39), h.epoch_of(40), h.epoch_of(1000)),
        (None, Some(2), Some(2), Some(5), Some(5))
    );
    assert_eq!(LeaderEpochHistory::default().latest_epoch(), None);
}

#[test]
fn only_strictly_increasing_non_negative_entries_form_a_history() {
    let e = |epoch, start_offset| EpochEntry { epoch, start_offset };
    assert!(LeaderEpochHistory::from_entries(vec![e(1, 0), e(1, 5)]).is_none(), "same epoch twice");
    assert!(LeaderEpochHistory::from_entries(vec![e(1, 5), e(2, 5)]).is_none(), "same start twice");
    assert!(LeaderEpochHistory::from_entries(vec![e(2, 0), e(1, 5)]).is_none(), "epoch going back");
    assert!(LeaderEpochHistory::from_entries(vec![e(-1, 0)]).is_none());
    assert!(LeaderEpochHistory::from_entries(vec![e(0, -3)]).is_none());
    assert!(LeaderEpochHistory::from_entries(vec![]).is_some());
}

#[test]
fn a_higher_epoch_is_new_the_same_changes_nothing_a_lower_is_refused() {
    let mut h = LeaderEpochHistory::default();
    assert_eq!(h.step(-1, 0), EpochStep::Refused { latest: -1 }, "a batch needs an epoch");
    assert_eq!(h.step(3, 0), EpochStep::New(EpochEntry { epoch: 3, start_offset: 0 }));
    h.push(EpochEntry { epoch: 3, start_offset: 0 });
    assert_eq!(h.step(3, 50), EpochStep::Same);
    assert_eq!(h.step(2, 50), EpochStep::Refused { latest: 3 });
    assert_eq!(h.step(4, 50), EpochStep::New(EpochEntry { epoch: 4, start_offset: 50 }));
    h.push(EpochEntry { epoch: 4, start_offset: 50 });
    // The entry of an append that failed after storing it starts at the
    // log end and wrote nothing: a later epoch at the same offset replaces it.
    assert_eq!(h.step(6, 50), EpochStep::New(EpochEntry { epoch: 6, start_offset: 50 }));
    h.push(EpochEntry { epoch: 6, start_offset: 50 });
    assert_eq!(h, history(&[(3, 0), (6, 50)]));
    assert_eq!(h.step(7, 49), EpochStep::Refused { latest: 6 }, "a new epoch never starts inside the last one");
}

#[test]
fn observing_the_log_adds_only_what_is_newer() {
    let mut h = history(&[(1, 0), (3, 20)]);
    h.observe(1, 10); // before the latest entry: the walk started earlier
    h.observe(3, 25);
    assert_eq!(h, history(&[(1, 0), (3, 20)]));
    h.observe(2, 30); // contradicts the history: logged, ignored
    h.observe(-1, 31);
    assert_eq!(h, history(&[(1, 0), (3, 20)]));
    h.observe(4, 40);
    h.observe(4, 45);
    h.observe(7, 50);
    assert_eq!(h, history(&[(1, 0), (3, 20), (4, 40), (7, 50)]));
}

#[test]
fn truncating_the_end_drops_entries_starting_at_or_after_it() {
    let mut h = history(&[(1, 0), (3, 20), (4, 40)]);
    assert!(!h.truncate_from_end(41));
    assert!(h.truncate_from_end(40), "an epoch starting at the new end wrote nothing below it");
    assert_eq!(h, history(&[(1, 0), (3, 20)]));
    assert!(h.truncate_from_end(5));
    assert_eq!(h, history(&[(1, 0)]));
    assert!(h.truncate_from_end(0));
    assert_eq!(h.entries(), &[]);
    assert!(!h.truncate_from_end(0));
}

#[test]
fn moving_the_start_drops_entries_below_and_starts_the_covering_one_there() {
    let mut h = history(&[(1, 0), (3, 20), (4, 40)]);
    assert!(!h.truncate_from_start(0));
    assert!(h.truncate_from_start(10));
    assert_eq!(h, history(&[(1, 10), (3, 20), (4, 40)]));
    assert!(h.truncate_from_start(20), "an entry starting exactly there replaces those below");
    assert_eq!(h, history(&[(3, 20), (4, 40)]));
    assert!(!h.truncate_from_start(20));
    assert!(h.truncate_from_start(55));
    assert_eq!(h, history(&[(4, 55)]));
    let mut gap = history(&[(2, 30)]);
    assert!(!gap.truncate_from_start(10), "a start before the first entry (a follower's gap) changes nothing");
    assert_eq!(gap, history(&[(2, 30)]));
}

#[test]
fn the_file_round_trips_and_damage_reads_as_absent() {
    let mem = MemStorage::new();
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let dir = Path::new("/p");
    storage.create_dir_all(dir).unwrap();
    assert_eq!(LeaderEpochHistory::load(&storage, dir).unwrap(), None, "missing");
    let h = history(&[(0, 0), (7, 1234), (8, 99_999_999_999)]);
    h.store(&storage, dir).unwrap();
    let path = dir.join(LEADER_EPOCH_FILE);
    let bytes = mem.read_file(&path).unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    assert!(
        text.starts_with(
            "kafgres-checkpoint 1\nepoch 0 start 0\nepoch 7 start 1234\nepoch 8 start 99999999999\ncrc32c "
        ),
        "{text}"
    );
    let after: Arc<dyn Storage> = Arc::new(mem.crash(CrashMode::DropUnsynced));
    assert_eq!(LeaderEpochHistory::load(&after, dir).unwrap(), Some(h.clone()), "durable once stored");
    for cut in 0..bytes.len() {
        mem.write_file(&path, &bytes[..cut]);
        assert_eq!(LeaderEpochHistory::load(&storage, dir).unwrap(), None, "cut at {cut}");
    }
    let mut flipped = bytes.clone();
    flipped[30] ^= 1;
    mem.write_file(&path, &flipped);
    assert_eq!(LeaderEpochHistory::load(&storage, dir).unwrap(), None, "CRC");
    // A valid CRC around entries out of order is damage too.
    let lines = vec!["epoch 3 start 10".to_string(), "epoch 2 start 20".to_string()];
    mem.write_file(&path, &encode_lines(&lines));
    assert_eq!(LeaderEpochHistory::load(&storage, dir).unwrap(), None, "order");
    let lines = vec!["epoch 3 start 10 extra".to_string()];
    mem.write_file(&path, &encode_lines(&lines));
    assert_eq!(LeaderEpochHistory::load(&storage, dir).unwrap(), None, "layout");
    LeaderEpochHistory::default().store(&storage, dir).unwrap();
    assert_eq!(LeaderEpochHistory::load(&storage, dir).unwrap(), Some(LeaderEpochHistory::default()));
}
