// AutoOrder (issue 18, Pecan's): reorders a pipeline's map ops where that changes no output
// byte, so that ops shrinking an element run before ops growing it.
//
// The commutation rule. Two adjacent map / parallel_map ops A then B may swap when neither has
// keep_position, both work on the same tensor (their UDFs' `index` param), and one UDF is
// kPixelwise while the other is kPixelSelecting (UdfRole, pipeline/core/udf.h). Why no byte changes:
// a pixel-selecting op (random_crop, random_flip) copies input pixels to positions it chooses
// from the image's height, width and its random key — never from the values — and a pixelwise
// op (normalize) maps each value alone, keeping the shape; so selecting then mapping gives, value
// for value, what mapping then selecting gives, and the selection draws the same numbers as long
// as the op keeps its random key (a moved op keeps its index in OpDef.original_index). Every
// other pair — resampling ops (resize interpolates, so it does not commute with normalize's
// rounding), decoders, parsers, filters, batch and anything across a mark, shuffle or any other
// op — stays in order. An element that fails may fail in the other op first (another message).
//
// The order: within each run of adjacent map ops, an op moves before its neighbour when the two
// commute and its inflation factor (bytes out / bytes in, measured on a sample) is lower — a
// stable sort by inflation through allowed swaps only. Inflation, not time, decides, so the order
// is a function of the data: every worker arrives at the same one.
#ifndef GRANARY_PIPELINE_OPTIMIZER_AUTO_ORDER_H_
#define GRANARY_PIPELINE_OPTIMIZER_AUTO_ORDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"
#include "proto/pipeline.pb.h"

namespace granary {

// What AutoOrder measured of each op of a pipeline (indexed like PipelineDef.ops).
struct OpProfile {
  // Mean bytes of an element's tensors after the op over before it; 1 for ops that were not
  // measured (not map ops, or after the first batch).
  double inflation = 1;
  // Mean wall time of the op per element, in microseconds (0 when not measured). Shown, not
  // used to order.
  double us_per_element = 0;
};

// Whether adjacent ops `a` then `b` may swap (the rule above). Unknown UDFs never move.
bool Commute(const OpDef& a, const OpDef& b, const PipelineRegistries& registries);

// `def` reordered by `profile` (one entry per op): moved ops get OpDef.original_index.
PipelineDef Reorder(const PipelineDef& def, const PipelineRegistries& registries,
                    const std::vector<OpProfile>& profile);

// Measures each map op of `def` up to its first batch on the first `sample` elements of the
// first split (in the source's order), in process: each op's bytes in and out, and its time.
// Shuffle, prefetch, take, skip and mark ops are left out of the measurement (they change no
// element). The errors of building or running the pipeline, annotated "AutoOrder profile".
absl::StatusOr<std::vector<OpProfile>> ProfileOps(const PipelineDef& def, const PipelineRegistries& registries,
                                                  Env* env, int sample = 8);

// The ops in order, by UDF (else op) name, a moved op with its index as written:
// "parse_example decode_jpeg random_crop(op 4) normalize(op 3) batch".
std::string DescribeOrder(const PipelineDef& def);

// ProfileOps then Reorder.
absl::StatusOr<PipelineDef> AutoOrder(const PipelineDef& def, const PipelineRegistries& registries, Env* env);

}  // namespace granary

#endif  // GRANARY_PIPELINE_OPTIMIZER_AUTO_ORDER_H_
