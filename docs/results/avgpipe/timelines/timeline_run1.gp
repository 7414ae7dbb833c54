# Written by bagpipe report; edit and run `gnuplot timeline_run1.gp` in this folder to redraw
# timeline_run1.svg and timeline_run1.png.
do for [format in "svg png"] {
if (format eq "svg") {
  set terminal svg size 1200,360 dynamic noenhanced font 'Helvetica,13' \
    background '#ffffff'
} else {
  set terminal pngcairo size 1200,360 noenhanced font 'Helvetica,11' \
    background '#ffffff'
}
set output 'timeline_run1.'.format
reset
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set title 'trace_1f1b: gpt allreduce, dp 1 x pp 2 x tp 1, 1f1b M=4, net bw=1Gbit,lat=1ms: pipeline timeline of steps 11-12'
set xlabel 'time since the first forward shown (ms); boxes coloured and labelled by micro-batch'
set xrange [0:205.8667]
set yrange [1.6:-0.6]
set ytics ('rank 0 (stage 0, replica 0, tp 0)' 0, 'rank 1 (stage 1, replica 0, tp 0)' 1)
set grid noytics
unset key
set bmargin 6
set object 1 rect from screen 0.12,0.02 to screen 0.145,0.045 fc rgb '#b9cbdd' fs solid noborder
set label 1 'forward (light)' at screen 0.152,0.033 left
set object 2 rect from screen 0.32,0.02 to screen 0.345,0.045 fc rgb '#4e79a7' fs solid noborder
set label 2 'backward (dark)' at screen 0.352,0.033 left
set object 3 rect from screen 0.52,0.02 to screen 0.545,0.045 fc rgb '#b0b0b0' fs solid noborder
set label 3 'waiting for another stage' at screen 0.552,0.033 left
set object 4 rect from screen 0.72,0.02 to screen 0.745,0.045 fc rgb '#1f3f8f' fs solid noborder
set label 4 'collective' at screen 0.752,0.033 left
set style fill solid 1.0 noborder
plot \
  'run1_timeline.dat' using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable, \
  'run1_timeline_labels.dat' using 1:2:3 with labels font ',9'
unset multiplot
set output
}
