// Internal to tracer/: the SQL text of the run-database schema (version `kSchemaVersion`,
// tracer/records.h), shared by the writer (creates it) and the reader (checks it).
// docs/schema.md documents every table and column; keep both in step.
#pragma once

namespace tdbg::tracer::internal {

// `meta.format` of every tdbg run database: how a reader tells one from any other SQLite file.
constexpr const char* kFormatName = "tdbg-run";
// `meta` key the writer owns: CLOCK_MONOTONIC at creation; `ops.start` is relative to it.
constexpr const char* kTimeBaseKey = "time_base_ns";

// Tables. Ops, with their tensors and arguments, are packed into `op_blocks` (one row per run
// of consecutive ops of a thread, tracer/op_block.h): SQLite's cost is per row, and one row
// per op and per tensor could not keep up with the dispatcher. `op_blocks` is a rowid table:
// its blobs (kilobytes) then fill overflow pages whole, where a WITHOUT ROWID table (an index
// b-tree, whose cells spill beyond a quarter page) would leave most of each overflow page empty. The views at the end unpack
// them with the table-valued functions of tracer/sql_functions.h for hand-written queries.
constexpr const char* kCreateTables = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE strings(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE frames(id INTEGER PRIMARY KEY, parent INTEGER, file INTEGER, line INTEGER NOT NULL,
                    function INTEGER);
CREATE TABLE threads(id INTEGER PRIMARY KEY, os_tid INTEGER NOT NULL, name TEXT NOT NULL);
CREATE TABLE op_blocks(
  id INTEGER PRIMARY KEY,
  thread INTEGER NOT NULL,
  first_tidx INTEGER NOT NULL,
  last_tidx INTEGER NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  count INTEGER NOT NULL,
  ops BLOB NOT NULL);
CREATE UNIQUE INDEX op_blocks_by_tidx ON op_blocks(thread, first_tidx);
CREATE INDEX op_blocks_by_seq ON op_blocks(thread, first_seq);
CREATE TABLE regions(id INTEGER PRIMARY KEY, thread INTEGER NOT NULL, name INTEGER,
                     kind INTEGER NOT NULL, start_seq INTEGER NOT NULL, end_seq INTEGER,
                     step INTEGER NOT NULL, parent INTEGER);
CREATE TABLE modules(id INTEGER PRIMARY KEY, kind INTEGER, name INTEGER, hash INTEGER,
                     size INTEGER NOT NULL, time_ns INTEGER NOT NULL);
CREATE TABLE kernels(op INTEGER, module INTEGER, name INTEGER, grid INTEGER, block INTEGER,
                     shared_mem INTEGER NOT NULL, stream INTEGER, start_ns INTEGER NOT NULL,
                     end_ns INTEGER NOT NULL);
CREATE INDEX kernels_by_op ON kernels(op);
CREATE TABLE enums(kind TEXT NOT NULL, value INTEGER NOT NULL, name TEXT NOT NULL,
                   PRIMARY KEY(kind, value)) WITHOUT ROWID;

CREATE VIEW op_view AS
SELECT o.seq, o.thread, o.tidx, o.parent, o.depth, n.text AS name, o.step, m.text AS module,
       o.stack, o.user_frame, o.fwd, o.region,
       o.start + (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'time_base_ns') AS start_ns,
       o.start + o.dur + (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'time_base_ns')
         AS end_ns,
       o.dur AS dur_ns, printf('%016x', o.chain) AS chain,
       CASE WHEN o.rng IS NULL THEN NULL ELSE printf('%016x', o.rng) END AS rng, o.flags
FROM op_blocks b, tdbg_ops(b.ops) o
LEFT JOIN strings n ON n.id = o.name LEFT JOIN strings m ON m.id = o.module;

CREATE VIEW tensor_view AS
SELECT t.op, r.name AS role, t.idx, d.name AS dtype, coalesce(sh.text, '') AS shape,
       dv.text AS device, st.name AS status,
       CASE WHEN t.hash IS NULL THEN NULL ELSE printf('%016x', t.hash) END AS hash,
       t.producer, t.min, t.max, t.sum, t.abs_sum, t.nan, t.inf, rs.text AS reason
FROM op_blocks b, tdbg_tensors(b.ops) t
LEFT JOIN enums r ON r.kind = 'role' AND r.value = t.role
LEFT JOIN enums d ON d.kind = 'dtype' AND d.value = t.dtype
LEFT JOIN enums st ON st.kind = 'status' AND st.value = t.status
LEFT JOIN strings sh ON sh.id = t.shape
LEFT JOIN strings dv ON dv.id = t.device
LEFT JOIN strings rs ON rs.id = t.reason;

CREATE VIEW arg_view AS
SELECT a.op, a.idx, n.text AS name, v.text AS value
FROM op_blocks b, tdbg_args(b.ops) a
LEFT JOIN strings n ON n.id = a.name LEFT JOIN strings v ON v.id = a.value;

CREATE VIEW frame_view AS
SELECT f.id, f.parent, fi.text AS file, f.line, fn.text AS function
FROM frames f LEFT JOIN strings fi ON fi.id = f.file LEFT JOIN strings fn ON fn.id = f.function;
)sql";

// Names of the stored enum values (`enums` table), for the views and for people.
constexpr const char* kFillEnums = R"sql(
INSERT INTO enums VALUES
 ('role',0,'input'),('role',1,'output'),
 ('status',0,'hashed'),('status',1,'known'),('status',2,'view'),('status',3,'uninitialized'),
 ('status',4,'not_hashed'),('status',5,'skipped'),
 ('region_kind',0,'user'),('region_kind',1,'step'),('region_kind',2,'module'),
 ('region_kind',3,'optimizer'),
 ('op_flag',1,'backward'),('op_flag',2,'random'),('op_flag',4,'inplace'),
 ('op_flag',8,'collective'),('op_flag',16,'uninit_output'),
 ('dtype',0,'bool'),('dtype',1,'uint8'),('dtype',2,'int8'),('dtype',3,'int16'),
 ('dtype',4,'int32'),('dtype',5,'int64'),('dtype',6,'float16'),('dtype',7,'bfloat16'),
 ('dtype',8,'float32'),('dtype',9,'float64'),('dtype',10,'complex32'),('dtype',11,'complex64'),
 ('dtype',12,'complex128'),('dtype',13,'uint16'),('dtype',14,'uint32'),('dtype',15,'uint64'),
 ('dtype',16,'float8_e4m3fn'),('dtype',17,'float8_e5m2'),('dtype',18,'qint8'),
 ('dtype',19,'quint8'),('dtype',20,'qint32'),('dtype',255,'unknown');
)sql";

}  // namespace tdbg::tracer::internal
