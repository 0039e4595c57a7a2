"""The shared floor of every report: Markdown/HTML tables and number formats (`tables`) and the
matplotlib plumbing that makes figures reproducible PNG bytes (`figures`). The evaluate and
translate reports and the sweep comparison build on it; it imports no stage."""
