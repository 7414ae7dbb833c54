# Written by bagpipe report; edit and run `gnuplot stages_run2.gp` in this folder to redraw
# stages_run2.svg and stages_run2.png.
do for [format in "svg png"] {
if (format eq "svg") {
  set terminal svg size 960,560 dynamic noenhanced font 'Helvetica,13' \
    background '#ffffff'
} else {
  set terminal pngcairo size 960,560 noenhanced font 'Helvetica,11' \
    background '#ffffff'
}
set output 'stages_run2.'.format
reset
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set title 'run002: gpt diloco, dp 2 x pp 1 x tp 1: pipeline stages over the run'
set xlabel 'pipeline stage'
set ylabel 'time over the run (s)'
set y2label 'peak stash (micro-batches held at once)'
set xrange [-0.6:0.4]
set xtics 1
set yrange [0:*]
set y2range [0:2]
set ytics nomirror
set y2tics 1
set boxwidth 0.35
set style fill solid 0.85
set key outside bottom center horizontal
plot \
  'run2_stages.dat' using ($1-0.18):2 with boxes lc rgb '#4e79a7' \
    title 'busy (forward and backward)', \
  '' using ($1+0.18):3 with boxes lc rgb '#e15759' \
    title 'idle (waiting for other stages: the bubble)', \
  '' using 1:4 axes x1y2 with linespoints lw 2 pt 7 ps 1.2 lc rgb '#222222' \
    title 'peak stash (right axis)'
unset multiplot
set output
}
