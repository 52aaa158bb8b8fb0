use jobqueue_core::Job;

#[derive(Job)]
#[job(type = "raw.bits")]
union Bits {
    int: u32,
    float: f32,
}

fn main() {}
