// The table-valued functions of sql_functions.h, as eponymous virtual tables. Compiled twice:
// into tdbg_tracer (calls SQLite directly) and, with TDBG_SQLITE_EXTENSION defined, into the
// loadable extension libtdbg_sqlite.so (calls SQLite through the routines table the host
// passes, as sqlite3ext.h requires, so it works in any host that links SQLite).
#ifdef TDBG_SQLITE_EXTENSION
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#else
#include <sqlite3.h>
#endif

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tracer/op_block.h"
#include "tracer/records.h"

namespace tdbg::tracer {
namespace {

enum class Kind { kOps, kTensors, kArgs };

// Column lists; the last, hidden column is the function's argument (the block).
constexpr const char* kOpsSchema =
    "CREATE TABLE x(seq INTEGER, thread INTEGER, tidx INTEGER, parent INTEGER, depth INTEGER,"
    " name INTEGER, step INTEGER, module INTEGER, stack INTEGER, user_frame INTEGER,"
    " fwd INTEGER, region INTEGER, start INTEGER, dur INTEGER, chain INTEGER, rng INTEGER,"
    " flags INTEGER, block HIDDEN)";
constexpr int kOpsColumns = 17;
constexpr const char* kTensorsSchema =
    "CREATE TABLE x(op INTEGER, role INTEGER, idx INTEGER, dtype INTEGER, shape INTEGER,"
    " device INTEGER, status INTEGER, hash INTEGER, producer INTEGER, min REAL, max REAL,"
    " sum REAL, abs_sum REAL, nan INTEGER, inf INTEGER, reason INTEGER, block HIDDEN)";
constexpr int kTensorsColumns = 16;
constexpr const char* kArgsSchema =
    "CREATE TABLE x(op INTEGER, idx INTEGER, name INTEGER, value INTEGER, block HIDDEN)";
constexpr int kArgsColumns = 4;

int hidden_column(Kind kind) {
  switch (kind) {
    case Kind::kOps: return kOpsColumns;
    case Kind::kTensors: return kTensorsColumns;
    case Kind::kArgs: return kArgsColumns;
  }
  return 0;
}

struct Table {
  sqlite3_vtab base;
  Kind kind;
};

struct Cursor {
  sqlite3_vtab_cursor base;
  std::vector<OpRecord> ops;
  size_t op = 0;   // current op
  size_t item = 0; // current tensor or arg of that op
  int64_t rowid = 0;
};

Table* table_of(sqlite3_vtab* vtab) { return reinterpret_cast<Table*>(vtab); }
Cursor* cursor_of(sqlite3_vtab_cursor* c) { return reinterpret_cast<Cursor*>(c); }

int connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  const Kind kind = *static_cast<const Kind*>(aux);
  const char* schema = kind == Kind::kOps       ? kOpsSchema
                       : kind == Kind::kTensors ? kTensorsSchema
                                                : kArgsSchema;
  int rc = sqlite3_declare_vtab(db, schema);
  if (rc != SQLITE_OK) return rc;
  auto* t = new Table();
  std::memset(&t->base, 0, sizeof t->base);
  t->kind = kind;
  *out = &t->base;
  return SQLITE_OK;
}

int disconnect(sqlite3_vtab* vtab) {
  delete table_of(vtab);
  return SQLITE_OK;
}

// The block argument must be given (`tdbg_ops(b.ops)`): an equality on the hidden column.
int best_index(sqlite3_vtab* vtab, sqlite3_index_info* info) {
  const int hidden = hidden_column(table_of(vtab)->kind);
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& c = info->aConstraint[i];
    if (c.iColumn == hidden && c.op == SQLITE_INDEX_CONSTRAINT_EQ) {
      if (!c.usable) return SQLITE_CONSTRAINT;
      info->aConstraintUsage[i].argvIndex = 1;
      info->aConstraintUsage[i].omit = 1;
      info->idxNum = 1;
      info->estimatedCost = 100;
      info->estimatedRows = 256;
      return SQLITE_OK;
    }
  }
  return SQLITE_CONSTRAINT;
}

int open_cursor(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
  auto* c = new Cursor();
  std::memset(&c->base, 0, sizeof c->base);
  *out = &c->base;
  return SQLITE_OK;
}

int close_cursor(sqlite3_vtab_cursor* cur) {
  delete cursor_of(cur);
  return SQLITE_OK;
}

size_t items(Kind kind, const OpRecord& op) {
  return kind == Kind::kTensors ? op.tensors.size() : op.args.size();
}

// Moves to the first row at or after (op, item).
void settle(Kind kind, Cursor* c) {
  if (kind == Kind::kOps) return;
  while (c->op < c->ops.size() && c->item >= items(kind, c->ops[c->op])) {
    ++c->op;
    c->item = 0;
  }
}

int filter(sqlite3_vtab_cursor* cur, int idx_num, const char*, int argc, sqlite3_value** argv) {
  Cursor* c = cursor_of(cur);
  const Kind kind = table_of(cur->pVtab)->kind;
  c->ops.clear();
  c->op = c->item = 0;
  c->rowid = 0;
  if (idx_num != 1 || argc < 1 || sqlite3_value_type(argv[0]) == SQLITE_NULL) return SQLITE_OK;
  const void* data = sqlite3_value_blob(argv[0]);
  const int n = sqlite3_value_bytes(argv[0]);
  std::string_view block(static_cast<const char*>(data), static_cast<size_t>(n));
  Status st = DecodeOpBlock(block, 0, kind != Kind::kOps, &c->ops);
  if (!st.ok()) {
    sqlite3_free(cur->pVtab->zErrMsg);
    cur->pVtab->zErrMsg = sqlite3_mprintf("%s", st.message().c_str());
    return SQLITE_CORRUPT;
  }
  settle(kind, c);
  return SQLITE_OK;
}

int next(sqlite3_vtab_cursor* cur) {
  Cursor* c = cursor_of(cur);
  const Kind kind = table_of(cur->pVtab)->kind;
  ++c->rowid;
  if (kind == Kind::kOps) {
    ++c->op;
  } else {
    ++c->item;
    settle(kind, c);
  }
  return SQLITE_OK;
}

int eof(sqlite3_vtab_cursor* cur) {
  Cursor* c = cursor_of(cur);
  return c->op >= c->ops.size();
}

void result_id(sqlite3_context* ctx, int64_t v) {
  if (v == 0) {
    sqlite3_result_null(ctx);
  } else {
    sqlite3_result_int64(ctx, v);
  }
}
void result_seq(sqlite3_context* ctx, int64_t v) {
  if (v == kNoSeq) {
    sqlite3_result_null(ctx);
  } else {
    sqlite3_result_int64(ctx, v);
  }
}
void result_u64(sqlite3_context* ctx, uint64_t v) {
  sqlite3_result_int64(ctx, static_cast<sqlite3_int64>(v));
}

int column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  Cursor* c = cursor_of(cur);
  const Kind kind = table_of(cur->pVtab)->kind;
  const OpRecord& op = c->ops[c->op];
  if (kind == Kind::kOps) {
    switch (col) {
      case 0: sqlite3_result_int64(ctx, op.seq); break;
      case 1: sqlite3_result_int64(ctx, op.thread); break;
      case 2: sqlite3_result_int64(ctx, op.tidx); break;
      case 3: result_seq(ctx, op.parent); break;
      case 4: sqlite3_result_int64(ctx, op.depth); break;
      case 5: result_id(ctx, op.name); break;
      case 6: sqlite3_result_int64(ctx, op.step); break;
      case 7: result_id(ctx, op.module); break;
      case 8: result_id(ctx, op.stack); break;
      case 9: result_id(ctx, op.user_frame); break;
      case 10: result_seq(ctx, op.fwd); break;
      case 11: result_id(ctx, op.region); break;
      case 12: sqlite3_result_int64(ctx, op.start_ns); break;
      case 13: sqlite3_result_int64(ctx, op.end_ns - op.start_ns); break;
      case 14: result_u64(ctx, op.chain); break;
      case 15: result_id(ctx, static_cast<int64_t>(op.rng)); break;
      case 16: sqlite3_result_int64(ctx, op.flags); break;
      default: sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
  }
  if (kind == Kind::kArgs) {
    const ArgRecord& a = op.args[c->item];
    switch (col) {
      case 0: sqlite3_result_int64(ctx, op.seq); break;
      case 1: sqlite3_result_int64(ctx, a.index); break;
      case 2: result_id(ctx, a.name); break;
      case 3: result_id(ctx, a.value); break;
      default: sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
  }
  const TensorRecord& t = op.tensors[c->item];
  const bool summary = t.summary.valid;
  switch (col) {
    case 0: sqlite3_result_int64(ctx, op.seq); break;
    case 1: sqlite3_result_int64(ctx, static_cast<int64_t>(t.role)); break;
    case 2: sqlite3_result_int64(ctx, t.index); break;
    case 3: sqlite3_result_int64(ctx, static_cast<int64_t>(t.dtype)); break;
    case 4: result_id(ctx, t.shape); break;
    case 5: result_id(ctx, t.device); break;
    case 6: sqlite3_result_int64(ctx, static_cast<int64_t>(t.status)); break;
    case 7: result_id(ctx, static_cast<int64_t>(t.hash)); break;
    case 8: result_seq(ctx, t.producer); break;
    case 9: summary ? sqlite3_result_double(ctx, t.summary.min) : sqlite3_result_null(ctx); break;
    case 10: summary ? sqlite3_result_double(ctx, t.summary.max) : sqlite3_result_null(ctx); break;
    case 11: summary ? sqlite3_result_double(ctx, t.summary.sum) : sqlite3_result_null(ctx); break;
    case 12:
      summary ? sqlite3_result_double(ctx, t.summary.abs_sum) : sqlite3_result_null(ctx);
      break;
    case 13: summary ? sqlite3_result_int64(ctx, t.summary.nan_count) : sqlite3_result_null(ctx); break;
    case 14: summary ? sqlite3_result_int64(ctx, t.summary.inf_count) : sqlite3_result_null(ctx); break;
    case 15: result_id(ctx, t.reason); break;
    default: sqlite3_result_null(ctx);
  }
  return SQLITE_OK;
}

int rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  *out = cursor_of(cur)->rowid;
  return SQLITE_OK;
}

sqlite3_module make_module() {
  sqlite3_module m;
  std::memset(&m, 0, sizeof m);
  m.iVersion = 0;
  m.xCreate = nullptr;  // eponymous only: usable as tdbg_ops(...) without CREATE VIRTUAL TABLE
  m.xConnect = connect;
  m.xBestIndex = best_index;
  m.xDisconnect = disconnect;
  m.xDestroy = disconnect;
  m.xOpen = open_cursor;
  m.xClose = close_cursor;
  m.xFilter = filter;
  m.xNext = next;
  m.xEof = eof;
  m.xColumn = column;
  m.xRowid = rowid;
  return m;
}

const sqlite3_module kModule = make_module();
const Kind kOpsKind = Kind::kOps;
const Kind kTensorsKind = Kind::kTensors;
const Kind kArgsKind = Kind::kArgs;

}  // namespace

int RegisterSqlFunctions(sqlite3* db) {
  int rc = sqlite3_create_module(db, "tdbg_ops", &kModule, const_cast<Kind*>(&kOpsKind));
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_module(db, "tdbg_tensors", &kModule, const_cast<Kind*>(&kTensorsKind));
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_module(db, "tdbg_args", &kModule, const_cast<Kind*>(&kArgsKind));
  }
  return rc;
}

}  // namespace tdbg::tracer

#ifdef TDBG_SQLITE_EXTENSION
// Entry points: SQLite derives `sqlite3_tdbgsqlite_init` from the file name libtdbg_sqlite.so.
extern "C" int sqlite3_tdbgsqlite_init(sqlite3* db, char**, const sqlite3_api_routines* api) {
  SQLITE_EXTENSION_INIT2(api);
  return tdbg::tracer::RegisterSqlFunctions(db);
}
extern "C" int sqlite3_extension_init(sqlite3* db, char** err, const sqlite3_api_routines* api) {
  return sqlite3_tdbgsqlite_init(db, err, api);
}
#endif
