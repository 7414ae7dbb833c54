# Written by bagpipe report; edit and run `gnuplot comm_run13.gp` in this folder to redraw
# comm_run13.svg and comm_run13.png.
do for [format in "svg png"] {
if (format eq "svg") {
  set terminal svg size 960,720 dynamic noenhanced font 'Helvetica,13' \
    background '#ffffff'
} else {
  set terminal pngcairo size 960,720 noenhanced font 'Helvetica,11' \
    background '#ffffff'
}
set output 'comm_run13.'.format
reset
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set multiplot layout 2,1 title 'pipelines.baseline: mlp allreduce, dp 1 x pp 2 x tp 1, 1f1b M=2: communication per step and axis'
set key top right opaque
set ylabel 'bytes sent per step, all ranks (MB)'
set yrange [0:*]
plot \
  'run13_steps.dat' using 1:3 with lines lw 1.5 lc rgb '#f28e2b' title 'pp'
set ylabel 'exposed communication per step, rank 0 (ms)'
set xlabel 'step'
plot \
  'run13_steps.dat' using 1:7 with lines lw 1.5 lc rgb '#f28e2b' title 'pp'
unset multiplot
set output
}
