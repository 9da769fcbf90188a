// Sortable tables: a click on a header of a table.sortable sorts its rows by that column,
// again to reverse. A cell's data-sort (a number in the canonical unit: bytes, seconds, B/s)
// sorts numerically, so "9.50 GB/s" comes before "11.00 GB/s"; other cells sort as text.
(function () {
  function key(row, index) {
    var cell = row.cells[index];
    if (!cell) return "";
    var raw = cell.getAttribute("data-sort");
    if (raw !== null && raw !== "" && !isNaN(Number(raw))) return Number(raw);
    return cell.textContent.trim().toLowerCase();
  }
  function compare(a, b) {
    if (typeof a === "number" && typeof b === "number") return a - b;
    if (typeof a === "number") return -1;
    if (typeof b === "number") return 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }
  function sortBy(table, header) {
    var headRow = header.parentNode;
    var index = Array.prototype.indexOf.call(headRow.cells, header);
    var body = table.tBodies[0];
    var rows = Array.prototype.filter.call(body.rows, function (r) { return r !== headRow; });
    var descending = header.getAttribute("aria-sort") === "ascending";
    rows.sort(function (a, b) {
      var order = compare(key(a, index), key(b, index));
      return descending ? -order : order;
    });
    Array.prototype.forEach.call(headRow.cells, function (c) { c.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.addEventListener("click", function (event) {
    var header = event.target.closest && event.target.closest("table.sortable th");
    if (header) sortBy(header.closest("table"), header);
  });
})();
