#!/usr/bin/env bash
# The model card's `clover run` demo: a 3-file repository no training data contains, and the six
# requests the card reports. Usage: scripts/demo_repo.sh [DIR] [MODEL]   (defaults: a temp dir, tiny)
# Writes DIR/shop/... and prints, per request, the tool calls and the final answer.
set -euo pipefail
DIR="${1:-$(mktemp -d)}"
MODEL="${2:-tiny}"
CLOVER="${CLOVER:-clover}"
mkdir -p "$DIR/shop"
printf '"""A small shop."""\n' > "$DIR/shop/__init__.py"
cat > "$DIR/shop/inventory.py" <<'PY'
"""Stock on the shelves."""

STOCK = {}


def restock_shelf(shelf, count):
    STOCK[shelf] = STOCK.get(shelf, 0) + count
    return STOCK[shelf]


def empty_shelf(shelf):
    STOCK.pop(shelf, None)
PY
cat > "$DIR/shop/prices.py" <<'PY'
"""Prices and discounts."""
from shop.inventory import restock_shelf


def apply_discount(price, percent):
    return round(price * (1 - percent / 100), 2)


def reprice(shelf, price):
    restock_shelf(shelf, 0)
    return apply_discount(price, 10)
PY
for task in "where is apply_discount defined?" "where is restock_shelf defined?" \
            "find uses of restock_shelf" "where is empty_shelf defined?" \
            "list the files in shop" "show me shop/prices.py"; do
  echo "### $task"
  "$CLOVER" run "$task" --model "$MODEL" --root "$DIR" --max-steps 3 --approval read-only --json |
    python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    kind = e.get("type") or e.get("event")
    if kind == "tool_call":
        print("  call  ", e["name"], json.dumps(e["arguments"]))
    elif kind == "tool_result":
        print("  result", json.dumps(e["output"])[:160])
    elif kind == "error":
        print("  error ", e["message"])
    elif kind == "turn_end":
        print("  answer", json.dumps(e["final_text"]))
'
done
