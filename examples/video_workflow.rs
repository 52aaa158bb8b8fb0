//! Workflows: a video is transcoded, then its thumbnails and its preview
//! are made side by side, then it is published once both are done, with
//! what they recorded; and a batch imports rows as one job each, with a
//! notice if all of them completed and a report when the last one ends,
//! however it ended. With `DATABASE_URL`
//! set: `cargo run --example video_workflow -- migrate`, `-- work` (in
//! another terminal), then `-- publish 7` and `-- import 20`; the ids they
//! print go to `-- workflow show ID`.

use diesel::prelude::*;
use jobqueue::prelude::*;
use jobqueue::{Batch, Workflow};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "video.transcode", queue = "media")]
struct Transcode {
    video: u32,
}

impl Perform for Transcode {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        println!("video {}: transcoded", self.video);
        // What the steps after this one read.
        ctx.set_result(&format!("videos/{}.mp4", self.video))
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "video.thumbnails", queue = "media")]
struct Thumbnails {
    video: u32,
}

impl Perform for Thumbnails {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let file: Option<String> = ctx.parent_result("transcode")?;
        println!(
            "video {}: thumbnails of {}",
            self.video,
            file.unwrap_or_default()
        );
        ctx.set_result(&3)
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "video.preview", queue = "media")]
struct Preview {
    video: u32,
}

impl Perform for Preview {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let file: Option<String> = ctx.parent_result("transcode")?;
        println!(
            "video {}: preview of {}",
            self.video,
            file.unwrap_or_default()
        );
        ctx.set_result(&format!("previews/{}.gif", self.video))
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "video.publish", queue = "media")]
struct Publish {
    video: u32,
}

impl Perform for Publish {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let thumbnails: Option<u32> = ctx.parent_result("thumbnails")?;
        let preview: Option<String> = ctx.parent_result("preview")?;
        println!(
            "video {}: published with {} thumbnails and {}",
            self.video,
            thumbnails.unwrap_or_default(),
            preview.unwrap_or_default()
        );
        Ok(())
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "import.row", queue = "imports")]
struct ImportRow {
    row: u32,
}

impl Perform for ImportRow {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if self.row % 10 == 7 {
            return Err(JobError::fail(format!("row {} is malformed", self.row)));
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "import.done", queue = "imports")]
struct ImportDone {
    rows: u32,
}

impl Perform for ImportDone {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        println!("all {} rows imported", self.rows);
        Ok(())
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "import.report", queue = "imports")]
struct ImportReport {
    rows: u32,
}

impl Perform for ImportReport {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        // `jobqueue workflow show` of the batch tells how each row ended.
        let batch = ctx
            .workflow_id()
            .map(|id| id.to_string())
            .unwrap_or_default();
        println!("import of {} rows finished (batch {batch})", self.rows);
        Ok(())
    }
}

/// Transcode, then thumbnails and preview side by side, then publish: one
/// workflow, enqueued in one transaction.
fn publish(conn: &mut PgConnection, video: u32) -> Result<(), jobqueue::Error> {
    let mut flow = Workflow::new(format!("publish video {video}"))?;
    let transcode = flow.add("transcode", &Transcode { video })?;
    let thumbnails = flow.add("thumbnails", &Thumbnails { video })?;
    let preview = flow.add("preview", &Preview { video })?;
    let publish = flow.add("publish", &Publish { video })?;
    flow.after(thumbnails, [transcode])?;
    flow.after(preview, [transcode])?;
    flow.after(publish, [thumbnails, preview])?;
    let enqueued = conn.transaction(|conn| flow.enqueue(conn))?;
    println!("workflow {}", enqueued.id);
    Ok(())
}

/// `rows` rows, one job each, a notice if every row completed (cancelled
/// otherwise), and a report once every row ended, however.
fn import(conn: &mut PgConnection, rows: u32) -> Result<(), jobqueue::Error> {
    let mut batch = Batch::new(format!("import of {rows} rows"))?;
    for row in 0..rows {
        batch.add(&ImportRow { row })?;
    }
    batch.on_success(&ImportDone { rows })?;
    batch.on_finish(&ImportReport { rows })?;
    let enqueued = batch.enqueue(conn)?;
    println!("batch {}", enqueued.id);
    Ok(())
}

fn main() -> Result<std::process::ExitCode, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, n] = args.as_slice()
        && (command == "publish" || command == "import")
    {
        let mut conn = PgConnection::establish(&std::env::var("DATABASE_URL")?)?;
        let n = n.parse()?;
        if command == "publish" {
            publish(&mut conn, n)?;
        } else {
            import(&mut conn, n)?;
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    Ok(jobqueue::Cli::new()
        .register::<Transcode>()
        .register::<Thumbnails>()
        .register::<Preview>()
        .register::<Publish>()
        .register::<ImportRow>()
        .register::<ImportDone>()
        .register::<ImportReport>()
        .main())
}
