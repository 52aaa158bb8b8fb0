//! The workflow example (`examples/video_workflow.rs`) as an operator runs
//! it: a worker process, then a video published (transcode, then
//! thumbnails and preview, then publish with their results) and a batch of
//! rows imported with its report; `workflow show` tells each step's state.

use jobqueue_tests::example::{example_binary, run_example, start_worker, stop_worker};
use jobqueue_tests::{TestDb, WAIT_LIMIT, assert_contains, assert_success};

#[test]
fn a_video_is_published_after_its_steps_and_a_batch_reports_once() {
    let db = TestDb::new();
    let example = example_binary("video_workflow");
    let run = |args: &[&str]| run_example(&example, &db.url, args);
    let (mut worker, lines) = start_worker(&example, &db.url, &["--concurrency", "4"]);
    let published = run(&["publish", "7"]);
    assert_success("publish", &published);
    let workflow = String::from_utf8_lossy(&published.stdout)
        .trim()
        .strip_prefix("workflow ")
        .expect("the workflow's id")
        .to_owned();
    let imported = run(&["import", "20"]);
    assert_success("import", &imported);
    let batch = String::from_utf8_lossy(&imported.stdout)
        .trim()
        .strip_prefix("batch ")
        .expect("the batch's id")
        .to_owned();

    let mut seen = Vec::new();
    while !(seen.iter().any(|l: &String| l.contains("published"))
        && seen
            .iter()
            .any(|l: &String| l.contains("import of 20 rows finished")))
    {
        let line = lines.recv_timeout(WAIT_LIMIT).unwrap_or_else(|e| {
            let _ = worker.kill();
            panic!(
                "the example stopped short ({e}); so far:\n{}",
                seen.join("\n")
            )
        });
        seen.push(line);
    }
    let at = |needle: &str| {
        seen.iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle}:\n{}", seen.join("\n")))
    };
    assert!(at("transcoded") < at("thumbnails of videos/7.mp4"));
    assert!(at("transcoded") < at("preview of videos/7.mp4"));
    assert!(at("thumbnails of") < at("published"));
    assert!(at("preview of") < at("published"));
    assert_contains(
        &seen[at("published")],
        &["published with 3 thumbnails and previews/7.gif"],
    );

    // Stopped gracefully: the outcomes in hand are written first.
    stop_worker(worker);
    let show = run(&["workflow", "show", &workflow]);
    assert_success("workflow show", &show);
    assert_contains(
        &String::from_utf8_lossy(&show.stdout),
        &[
            "publish video 7",
            "4 (4 completed, 0 failed, 0 cancelled, 0 not ended)",
        ],
    );
    // The report ran once, after every row ended: rows 7 and 17 failed for
    // good, so the notice of success was cancelled.
    let show = run(&["workflow", "show", &batch]);
    assert_success("workflow show", &show);
    let show = String::from_utf8_lossy(&show.stdout);
    assert_contains(
        &show,
        &["22 (19 completed, 2 failed, 1 cancelled, 0 not ended)"],
    );
    assert!(
        show.lines()
            .any(|l| l.starts_with("on_success ") && l.contains("cancelled")),
        "{show}"
    );
    assert!(!seen.iter().any(|l| l.contains("rows imported")));
    assert_eq!(
        seen.iter()
            .filter(|l| l.contains("import of 20 rows finished"))
            .count(),
        1
    );
}
