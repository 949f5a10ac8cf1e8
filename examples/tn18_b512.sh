#!/usr/bin/env bash
# The 18-operand tensor network tn18-b512: forward path, every gradient, every strategy.
# Extra options pass through, e.g. --optimize dp, --grad 9-17, --json report.json.
# Three timed blocks per phase keep the example quick; a later --repeats overrides it.
set -euo pipefail
exec einsum-analyze \
  "bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz" \
  --shapes 512x2,512x2,512x2,512x2,512x2,512x2,512x2,512x2,512x2,2x7,7x2x7,7x2x7,7x2x7,7x2x10x7,7x2x7,7x2x7,7x2x7,7x2 \
  --repeats 3 --warmup 1 \
  "$@"
