# Written by bagpipe report; edit and run `gnuplot comm_run6.gp` in this folder to redraw
# comm_run6.svg and comm_run6.png.
do for [format in "svg png"] {
if (format eq "svg") {
  set terminal svg size 960,720 dynamic noenhanced font 'Helvetica,13' \
    background '#ffffff'
} else {
  set terminal pngcairo size 960,720 noenhanced font 'Helvetica,11' \
    background '#ffffff'
}
set output 'comm_run6.'.format
reset
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set multiplot layout 2,1 title 'run006: gpt streaming-diloco, dp 2 x pp 1 x tp 1: communication per step and axis'
set key top right opaque
set ylabel 'bytes sent per step, all ranks (MB)'
set yrange [0:*]
plot \
  'run6_steps.dat' using 1:2 with lines lw 1.5 lc rgb '#4e79a7' title 'dp'
set ylabel 'exposed communication per step, rank 0 (ms)'
set xlabel 'step'
plot \
  'run6_steps.dat' using 1:6 with lines lw 1.5 lc rgb '#4e79a7' title 'dp'
unset multiplot
set output
}
